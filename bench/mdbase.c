// mdbase: the least a metadata benchmark can do, for bench/compare.sh.
// mdtest has no Debian package and its source is not reachable here; this is
// its inner loop (mdtest -F -u -n N with P ranks as P threads): each thread
// creates N empty files in its own directory (open O_CREAT|O_EXCL + close, no
// fsync), then stats them, then unlinks them; each phase is timed from a
// barrier before it to a barrier after it, as mdtest times it.
//
//   mdbase DIR THREADS FILES   prints: create <ops/s> stat <ops/s> remove <ops/s>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static int nthreads, nfiles;
static pthread_barrier_t bar;
static double t[4];

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg) {
	long k = (long)arg;
	char d[4096], p[4200];
	snprintf(d, sizeof d, "%s/w%ld", dir, k);
	mkdir(d, 0755);
	for (int phase = 0; phase < 3; phase++) {
		pthread_barrier_wait(&bar);
		if (k == 0) t[phase] = now();
		for (int i = 0; i < nfiles; i++) {
			snprintf(p, sizeof p, "%s/f.%ld.%d", d, k, i);
			struct stat st;
			if (phase == 0) {
				int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
				if (fd < 0 || close(fd) < 0) { perror(p); exit(1); }
			} else if (phase == 1) {
				if (stat(p, &st) < 0) { perror(p); exit(1); }
			} else if (unlink(p) < 0) { perror(p); exit(1); }
		}
	}
	pthread_barrier_wait(&bar);
	if (k == 0) t[3] = now();
	rmdir(d);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 4) { fprintf(stderr, "usage: mdbase DIR THREADS FILES\n"); return 2; }
	dir = argv[1]; nthreads = atoi(argv[2]); nfiles = atoi(argv[3]);
	pthread_barrier_init(&bar, NULL, nthreads);
	pthread_t th[nthreads];
	for (long k = 0; k < nthreads; k++) pthread_create(&th[k], NULL, worker, (void *)k);
	for (int k = 0; k < nthreads; k++) pthread_join(th[k], NULL);
	// Phase p ran from t[p] to the next barrier; the worker 0 records the
	// start of each phase right after a barrier, so phase p ends at t[p+1].
	double n = (double)nthreads * nfiles;
	printf("create %.0f stat %.0f remove %.0f\n", n / (t[1] - t[0]), n / (t[2] - t[1]), n / (t[3] - t[2]));
	return 0;
}
