// JvmMonitor: four Java threads fight over one `synchronized` monitor, each entering it 50
// times and holding it ~1 ms, busy. HotSpot blocks a thread that finds the monitor taken in
// ObjectMonitor::enter (libjvm.so), parked on an event of its own (a pthread condition
// variable and its futex): contend attributes those waits to the monitor frames.
//
// Build: javac -d DIR examples/waits/JvmMonitor.java; run: java -cp DIR JvmMonitor
// (with -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit the JVM writes
// /tmp/perf-PID.map at exit, naming its JIT-compiled code).
// Options: -t THREADS (4), -n LOCKS_PER_THREAD (50), -u HOLD_US (1000).
//
// Truth line (examples/README.md): pid the JVM's process id, wait_ns the threads' wall time
// spent entering the monitor summed, slow the entries that took over 50 µs.
public class JvmMonitor {
    static final Object HOT = new Object();

    public static void main(String[] args) throws Exception {
        int threads = 4, n = 50;
        long holdNs = 1_000_000;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                usage();
            }
            long v = Long.parseLong(args[++i]);
            switch (a) {
                case "-t": threads = (int) v; break;
                case "-n": n = (int) v; break;
                case "-u": holdNs = v * 1000; break;
                default: usage();
            }
        }
        final int locks = n;
        final long hold = holdNs;
        long[] waits = new long[threads];
        long[] slow = new long[threads];
        java.util.concurrent.CountDownLatch start = new java.util.concurrent.CountDownLatch(1);
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < locks; i++) {
                    long t0 = System.nanoTime();
                    synchronized (HOT) {
                        long w = System.nanoTime() - t0;
                        waits[id] += w;
                        if (w > 50_000) {
                            slow[id]++;
                        }
                        long until = System.nanoTime() + hold;
                        while (System.nanoTime() < until) {
                            Thread.onSpinWait();
                        }
                    }
                }
            }, "monitor-" + t);
            ts[t].start();
        }
        start.countDown();
        long total = 0, nslow = 0;
        for (int t = 0; t < threads; t++) {
            ts[t].join();
            total += waits[t];
            nslow += slow[t];
        }
        System.out.printf("truth program=JvmMonitor pid=%d threads=%d locks_per_thread=%d hold_ns=%d wait_ns=%d slow=%d%n",
                ProcessHandle.current().pid(), threads, locks, hold, total, nslow);
    }

    static void usage() {
        System.err.println("usage: JvmMonitor [-t THREADS] [-n LOCKS_PER_THREAD] [-u HOLD_US]");
        System.exit(2);
    }
}
