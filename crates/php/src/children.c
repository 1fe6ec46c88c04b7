/*
 * The signals a PHP script's child processes start with: those of a child of php-cgi's
 * script, nothing blocked. The worker keeps SIGTERM blocked while a script runs (a retire
 * waits for the script's end instead of cutting its sleep() short) and SIGUSR2 blocked on
 * the script's thread (the slowlog's stack thread takes it), and a child inherits its
 * parent thread's mask across fork and exec: a `sleep 30` started by proc_open() ignored
 * proc_terminate()'s SIGTERM until the worker's 6 s wait ran out (issue 34), and a job a
 * script started in the background could not be stopped but by SIGKILL.
 *
 * So the mask the worker had before any of that (what drover_php_child_signals() is given)
 * is put back in every child, whichever way PHP starts it:
 * - fork(), as proc_open() and pcntl_fork() do: a pthread_atfork() child handler;
 * - popen(), as exec(), shell_exec(), system(), passthru(), the backtick operator and mail()
 *   do: glibc's popen() starts the child with posix_spawn(), which runs no fork handler and
 *   gives the child the calling thread's mask, so drover-php defines popen() itself (the
 *   build exports it, so libphp's and every extension's calls land here): the child mask
 *   is set around the real one. A signal that arrives meanwhile runs its handler on the
 *   script's thread: SIGTERM's only records the retire, SIGUSR2's writes the stack.
 * Dispositions need nothing: exec resets each handled signal to its default, and the one
 * an app's signals the worker ignores, SIGPIPE, php-cgi ignores too (measured: the same
 * SigIgn in both children, but for glibc's own signals 32 and 33, which glibc sets as a
 * process's threads need).
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

static sigset_t child_mask;
static int child_mask_set;

static void restore_child_mask(void)
{
	pthread_sigmask(SIG_SETMASK, &child_mask, NULL);
}

/* Call once, in the zygote before PHP starts, with the workers' mask; the fork handler and
 * the mask are inherited by every worker. */
void drover_php_child_signals(const sigset_t *mask)
{
	child_mask = *mask;
	if (!child_mask_set) {
		pthread_atfork(NULL, NULL, restore_child_mask);
	}
	child_mask_set = 1;
}

FILE *popen(const char *command, const char *type)
{
	static FILE *(*next)(const char *, const char *);
	if (!next) {
		next = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "popen");
		if (!next) {
			errno = ENOSYS;
			return NULL;
		}
	}
	if (!child_mask_set) {
		return next(command, type);
	}
	sigset_t before;
	pthread_sigmask(SIG_SETMASK, &child_mask, &before);
	FILE *stream = next(command, type);
	int saved = errno;
	pthread_sigmask(SIG_SETMASK, &before, NULL);
	errno = saved;
	return stream;
}
