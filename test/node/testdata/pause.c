/* pause: a static process that waits for a signal; the tests chroot it
 * into a container root of their making. With arguments, it first starts
 * them as its child (fork, then exec of argv[1] with the rest) and prints
 * the child's PID on a line: copied to nvidia-cuda-mps-control, it starts
 * a copy named nvidia-cuda-mps-server as the driver's control daemon
 * starts its server. */
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1) {
        pid_t child = fork();
        if (child == 0) {
            execv(argv[1], argv + 1);
            _exit(127);
        }
        printf("%d\n", (int)child);
        fflush(stdout);
    }
    for (;;) pause();
}
