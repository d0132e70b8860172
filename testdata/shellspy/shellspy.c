/* shellspy: stands in for sh, bash and dash in the black-box tests that
 * prove the entrypoint never invokes a shell. Each invocation appends its
 * argv to the file named by MARKER (fixed at compile time, since a shell
 * could be started with any environment) and exits 0. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#ifndef MARKER
#error "compile with -DMARKER='\"/path/to/marker\"'"
#endif

int main(int argc, char **argv) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0666);
    if (fd < 0) return 0;
    for (int i = 0; i < argc; i++) {
        write(fd, argv[i], strlen(argv[i]));
        write(fd, " ", 1);
    }
    write(fd, "\n", 1);
    close(fd);
    return 0;
}
