/* childreport: the command the black-box tests exec through the entrypoint.
 * It is C, not Go, so that nothing of a runtime hides what it inherited: it
 * prints its PID, argv and environment (hex, so any byte survives), working
 * directory, umask, signal masks, open descriptors and limits, one fact a
 * line, then exits with the status given as REPORT_EXIT (default 0). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void hex(const char *key, const char *s) {
    printf("%s=", key);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) printf("%02x", *p);
    printf("\n");
}

static void status_lines(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[512];
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Umask:", 6) || !strncmp(line, "SigBlk:", 7) ||
            !strncmp(line, "SigIgn:", 7) || !strncmp(line, "SigCgt:", 7)) {
            char *tab = strchr(line, ':');
            *tab = '=';
            char *v = tab + 1;
            while (*v == ' ' || *v == '\t') memmove(v, v + 1, strlen(v));
            printf("%s", line);
        }
    fclose(f);
}

static void fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int self = dirfd(d);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
        char path[300], target[512];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n < 0 ? 0 : n] = 0;
        printf("fd=%s %s\n", e->d_name, target);
    }
    closedir(d);
}

static void limits(void) {
    FILE *f = fopen("/proc/self/limits", "r");
    char line[512];
    if (!f) return;
    while (fgets(line, sizeof line, f)) printf("limit=%s", line);
    fclose(f);
}

int main(int argc, char **argv) {
    char cwd[4096];
    printf("pid=%d\nppid=%d\n", getpid(), getppid());
    printf("cwd=%s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
    printf("argc=%d\n", argc);
    for (int i = 0; i < argc; i++) hex("argv", argv[i]);
    for (char **e = environ; *e; e++) hex("env", *e);
    status_lines();
    fds();
    limits();
    fflush(stdout);
    const char *code = getenv("REPORT_EXIT");
    return code ? atoi(code) : 0;
}
