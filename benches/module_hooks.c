/*
 * What worker mode's request scope adds to a request for the modules' request hooks
 * (crates/php/src/scope.c, issue 30): each loaded module's request shutdown,
 * post-deactivate and request startup, run 20000 times in a row inside one request of
 * PHP's embed SAPI (Debian's libphp8.2 and its embed conf.d, the modules drover-php
 * loads), but for the modules scope.c leaves alone (kept[] below is its kept_modules).
 * Prints the process CPU time per cycle of each module's hooks, in µs. A loop in one
 * process, so it reads on a shared machine where worker_loop.py's per-request times
 * move by tens of µs with the load.
 *
 *     gcc -O2 -o /tmp/module_hooks benches/module_hooks.c $(php-config --includes) -lphp8.2
 *     /tmp/module_hooks
 */
#include <sapi/embed/php_embed.h>

#include <strings.h>
#include <time.h>

static const char *const kept[] = {
	"standard", "SPL", "date", "pcntl", "Phar", "FFI", "mysqli", "Zend OPcache", NULL,
};

static int is_kept(const char *name)
{
	for (const char *const *k = kept; *k; k++) {
		if (strcasecmp(*k, name) == 0) {
			return 1;
		}
	}
	return 0;
}

static double cpu_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const int cycles = 20000;
	double total = 0;
	PHP_EMBED_START_BLOCK(argc, argv)
	zend_module_entry *m;
	ZEND_HASH_MAP_FOREACH_PTR(&module_registry, m) {
		if (is_kept(m->name) ||
		    !(m->request_startup_func || m->request_shutdown_func || m->post_deactivate_func)) {
			continue;
		}
		double start = cpu_seconds();
		for (int i = 0; i < cycles; i++) {
			if (m->request_shutdown_func) {
				m->request_shutdown_func(m->type, m->module_number);
			}
			if (m->post_deactivate_func) {
				m->post_deactivate_func();
			}
			if (m->request_startup_func) {
				m->request_startup_func(m->type, m->module_number);
			}
		}
		double us = (cpu_seconds() - start) / cycles * 1e6;
		total += us;
		printf("%-12s %.3f µs\n", m->name, us);
	} ZEND_HASH_FOREACH_END();
	printf("%-12s %.3f µs\n", "all", total);
	PHP_EMBED_END_BLOCK()
}
