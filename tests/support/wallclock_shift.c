/* An LD_PRELOAD shim that shifts the wall clock (CLOCK_REALTIME, gettimeofday, time) of a
 * process by the whole seconds written in the file named by TENURE_CLOCK_OFFSET_FILE ("-60":
 * a minute behind), read again at every call, so rewriting the file steps a running process.
 * Monotonic clocks are left alone.
 *
 * Why not libfaketime (Debian's libfaketime with FAKETIME_NO_CACHE=1 and a timestamp file):
 * it is not thread-safe when it reads the file at every call. Four Python threads reading
 * time.time() 200,000 times each, 600 s stepped back, got up to 544,157 of 800,000 readings on
 * the real clock (258 and 241 in two other runs; 0 with this shim): a store's background
 * threads made a client's clock flicker back and forth. It also hangs Debian's redis-server at
 * start, which is linked with jemalloc, whose initialization calls clock_gettime before
 * libfaketime has initialized itself (libfaketime issue #130, unfixed). This shim keeps its
 * state on the stack and calls the kernel directly (no dlsym, no allocation), so it cannot
 * race or recurse.
 *
 * Built by faketime.py: cc -shared -fPIC -O2 -o wallclock_shift.so wallclock_shift.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long offset_seconds(void) {
    const char *path = getenv("TENURE_CLOCK_OFFSET_FILE");
    char text[32];
    long value = 0;
    int negative = 0, i = 0;
    if (path == NULL) return 0;
    int fd = (int)syscall(SYS_open, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    long length = (long)syscall(SYS_read, fd, text, sizeof text - 1);
    syscall(SYS_close, fd);
    if (length <= 0) return 0;
    text[length] = '\0';
    if (text[0] == '+' || text[0] == '-') negative = text[i++] == '-';
    for (; text[i] >= '0' && text[i] <= '9'; i++) value = value * 10 + (text[i] - '0');
    return negative ? -value : value;
}

int clock_gettime(clockid_t clock, struct timespec *now) {
    int result = (int)syscall(SYS_clock_gettime, clock, now);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        now->tv_sec += offset_seconds();
    return result;
}

int gettimeofday(struct timeval *restrict now, void *restrict zone) {
    struct timespec precise;
    (void)zone;
    if (now == NULL) return 0;
    if (clock_gettime(CLOCK_REALTIME, &precise) != 0) return -1;
    now->tv_sec = precise.tv_sec;
    now->tv_usec = precise.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *now) {
    struct timespec precise;
    if (clock_gettime(CLOCK_REALTIME, &precise) != 0) return (time_t)-1;
    if (now != NULL) *now = precise.tv_sec;
    return precise.tv_sec;
}
