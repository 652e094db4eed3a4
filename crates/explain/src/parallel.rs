//! One work queue for the analyses that spread jobs over the CPUs.

/// `f` of each job on up to as many threads as there are CPUs, results in job order.
pub(crate) fn run_parallel<J: Copy + Send + Sync, R: Send>(
    jobs: &[J],
    f: impl Fn(J) -> R + Sync,
) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len());
    if workers < 2 {
        return jobs.iter().map(|&j| f(j)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<R>> = Vec::new();
    results.resize_with(jobs.len(), || None);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&j) = jobs.get(k) else {
                            return done;
                        };
                        done.push((k, f(j)));
                    }
                })
            })
            .collect();
        for h in handles {
            let done = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            for (k, r) in done {
                results[k] = Some(r);
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.expect("every job was taken by a worker"))
        .collect()
}
