/* pause: a static process that waits for a signal; the tests chroot it
 * into a container root of their making. */
#include <unistd.h>
int main(void) {
    for (;;) pause();
}
