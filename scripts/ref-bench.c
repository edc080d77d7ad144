/*
 * The reference harness of "Profiling eBPF Code", written from its description:
 * clock_gettime(CLOCK_MONOTONIC) through the vDSO, the raw syscall(SYS_openat, ...), a sample
 * buffer mmapped with MAP_POPULATE, mlocked and pre-touched, nothing printed until the loop is
 * over, the fd closed outside the timed span. Prints the kept samples (first 10% dropped as
 * warm-up), one latency in ns per line.
 *
 * Build: cc -O2 -o ref-bench scripts/ref-bench.c
 * Usage: ref-bench PATH N
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s PATH N\n", argv[0]);
		return 2;
	}
	const char *path = argv[1];
	uint64_t n = strtoull(argv[2], NULL, 10);
	if (n == 0) {
		fprintf(stderr, "N must be a positive integer\n");
		return 2;
	}
	long probe = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
	if (probe < 0) {
		perror(path);
		return 2;
	}
	close((int)probe);

	size_t bytes = n * sizeof(uint32_t);
	uint32_t *d = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (d == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (mlock(d, bytes) != 0)
		perror("mlock (continuing, pre-faulted anyway)");
	for (uint64_t i = 0; i < n; i++)
		((volatile uint32_t *)d)[i] = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
		uint64_t t1 = now_ns();
		if (fd >= 0)
			close((int)fd);
		d[i] = (uint32_t)(t1 - t0);
	}

	for (uint64_t i = n / 10; i < n; i++)
		printf("%u\n", d[i]);
	return 0;
}
