/* sigwrap: starts a program the way an unusual parent might, with signals
 * blocked or ignored, so tests can check what the entrypoint passes on.
 * usage: sigwrap [-b SIGNUM]... [-i SIGNUM]... -- PROGRAM [ARG...] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    sigset_t set;
    sigemptyset(&set);
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i += 2) {
        int sig = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-b")) sigaddset(&set, sig);
        else signal(sig, SIG_IGN);
    }
    sigprocmask(SIG_BLOCK, &set, NULL);
    execv(argv[i + 1], argv + i + 1);
    perror("sigwrap: execv");
    return 127;
}
