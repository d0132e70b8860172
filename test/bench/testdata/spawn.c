/* spawn: the benchmark's launcher. It starts one measured program and
 * reports on it, so that the measurement does not inherit the benchmark's
 * own Go process: a child forked from a large process starts with that
 * process's memory high-water mark in its ru_maxrss (and Go forks with
 * CLONE_VM, sharing it outright), while this launcher is a small static C
 * program.
 *
 * usage: spawn RESULT_FILE CAP_MS PROGRAM [ARG...]
 *
 * It reads CLOCK_MONOTONIC, forks, and the child execs PROGRAM in a process
 * group of its own with the launcher's environment. After CAP_MS the whole
 * group is killed. When the child is reaped (with everything it reaped
 * itself, as wait4 counts), the launcher kills what is left of the group and
 * writes one line to RESULT_FILE:
 *   t0_ns t1_ns utime_us stime_us maxrss_kb status killed
 * where status is the exit status, or 128+signal. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t killed;
static volatile pid_t child;

static void on_alarm(int sig) {
    (void)sig;
    killed = 1;
    kill(-child, SIGKILL);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: spawn RESULT_FILE CAP_MS PROGRAM [ARG...]\n");
        return 2;
    }
    long cap_ms = atol(argv[2]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);

    long long t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) { perror("spawn: fork"); return 1; }
    if (pid == 0) {
        setpgid(0, 0);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGALRM, &sa, NULL);
        execve(argv[3], argv + 3, environ);
        fprintf(stderr, "spawn: %s: %s\n", argv[3], strerror(errno));
        _exit(127);
    }
    child = pid;
    setpgid(pid, pid); /* no race with the child's own call: whichever runs first wins */
    struct itimerval it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = cap_ms / 1000;
    it.it_value.tv_usec = (cap_ms % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, NULL);

    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) { perror("spawn: wait4"); return 1; }
    }
    long long t1 = now_ns();
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, NULL);
    kill(-pid, SIGKILL);

    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *f = fopen(argv[1], "w");
    if (!f) { perror("spawn: result file"); return 1; }
    fprintf(f, "%lld %lld %lld %lld %ld %d %d\n", t0, t1,
            (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
            (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec,
            ru.ru_maxrss, code, (int)killed);
    return fclose(f) == 0 ? 0 : 1;
}
