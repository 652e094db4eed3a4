/* A shared library that prog.c loads with dlopen. */
#include <pthread.h>

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
volatile int plugin_sink;

__attribute__((noinline)) static void *plugin_where(void) {
    void *ra = __builtin_return_address(0);
    plugin_sink++;
    return ra;
}

void *plugin_call(void) {
    pthread_mutex_lock(&plugin_lock);
    void *ra = plugin_where(); /* @plugin_call_site */
    pthread_mutex_unlock(&plugin_lock);
    return ra;
}

void *plugin_lock_addr(void) { return &plugin_lock; }
