// C++ test program: a function template member in a namespace, and a namespaced std::mutex.
#include <cstdio>
#include <fstream>
#include <mutex>

namespace contend_test {
std::mutex registry_mutex;
volatile int sink;

__attribute__((noinline)) void *where_am_i() {
    void *ra = __builtin_return_address(0);
    sink = sink + 1;
    return ra;
}

template <typename T> struct Box {
    T value;
    __attribute__((noinline)) void *get(T x) {
        value = x;
        void *ra = where_am_i(); // @cpp_call
        sink = sink + 1;
        return ra;
    }
};
} // namespace contend_test

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    contend_test::Box<int> box;
    std::lock_guard<std::mutex> guard(contend_test::registry_mutex);
    std::printf("cpp_call %p\n", box.get(3));
    std::printf("registry_mutex %p\n", static_cast<void *>(&contend_test::registry_mutex));
    std::ifstream in("/proc/self/maps");
    std::ofstream out(argv[1]);
    out << in.rdbuf();
    return out.good() ? 0 : 3;
}
