/* sigcatch: a command for the supervise-mode tests. It catches every signal
 * it can, prints "ready <pid>" once its handlers are in place, then one line
 * "<pid> <signo>" per signal it receives. On SIGTERM it exits with the
 * status SIGCATCH_TERM_EXIT (default 0), as a training script's SIGTERM
 * handler would. With -f it forks first: parent and child both catch, in
 * the same process group, and print their own lines. With -o it first
 * starts a grandchild that outlives its parent (an orphan) and prints
 * "orphan <pid>"; the orphan exits after 300 ms. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int term_exit;

static void put(int sig) {
    char buf[32], tmp[16];
    int n = 0, d, p = getpid();
    for (d = 0; p > 0; p /= 10) tmp[d++] = '0' + p % 10;
    while (d) buf[n++] = tmp[--d];
    buf[n++] = ' ';
    for (d = 0; sig > 0; sig /= 10) tmp[d++] = '0' + sig % 10;
    while (d) buf[n++] = tmp[--d];
    buf[n++] = '\n';
    if (write(1, buf, n) < 0) _exit(99);
}

static void handler(int sig) {
    put(sig);
    if (sig == SIGTERM) _exit(term_exit);
}

int main(int argc, char **argv) {
    const char *e = getenv("SIGCATCH_TERM_EXIT");
    term_exit = e ? atoi(e) : 0;
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int s = 1; s < 65; s++) {
        if (s == SIGKILL || s == SIGSTOP) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sigaction(s, &sa, NULL);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f")) fork();
        if (!strcmp(argv[i], "-o") && fork() == 0) {
            if (fork() == 0) {
                printf("orphan %d\n", getpid());
                usleep(300000);
                _exit(0);
            }
            _exit(0);
        }
    }
    printf("ready %d\n", getpid());
    for (;;) pause();
}
