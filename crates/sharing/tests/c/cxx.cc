// C++ through the runtime: operator new/delete, std::thread, std::atomic, std::mutex,
// exceptions, virtual calls, strings. Prints results to compare with an uninstrumented build.
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

struct Shape {
    virtual ~Shape() = default;
    virtual long area() const = 0;
};
struct Square : Shape {
    long side;
    explicit Square(long s) : side(s) {}
    long area() const override { return side * side; }
};

int main() {
    std::atomic<long> total{0};
    std::mutex m;
    std::vector<std::string> log;
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; t++)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 1000; i++) {
                auto s = std::make_unique<Square>(i % 7 + t);
                total.fetch_add(s->area(), std::memory_order_relaxed);
            }
            std::lock_guard<std::mutex> g(m);
            log.push_back("thread " + std::to_string(t));
        });
    for (auto &th : threads)
        th.join();
    long caught = 0;
    try {
        throw std::runtime_error("boom");
    } catch (const std::exception &e) {
        caught = std::string(e.what()).size();
    }
    auto *arr = new long[100]();
    arr[99] = 5;
    long sum = arr[99];
    delete[] arr;
    std::printf("total %ld log %zu caught %ld sum %ld\n", total.load(), log.size(), caught, sum);
    return total.load() > 0 && log.size() == 3 && caught == 4 && sum == 5 ? 0 : 1;
}
