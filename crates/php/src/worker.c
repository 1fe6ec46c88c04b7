/*
 * PHP worker mode (`[php] worker = "FILE"`): each worker process runs FILE once; the script
 * boots its app, then loops, and each call of frankenphp_handle_request($handler) (also
 * named drover_handle_request) waits for one request, runs $handler with that request's
 * superglobals, ends the request, and returns true; false once the worker must stop.
 *
 * The script runs on a stack of its own (a ucontext), drover's worker loop on the
 * process's: the loop (drover_worker::serve) stays the driver, as in classic mode, and
 * hands each request to drover_php_worker_handle(), which switches to the script; the
 * script's next frankenphp_handle_request() switches back. Accepting, keep-alive, the
 * status and ping answers, and the request ledger are the classic mode's code.
 * docs/ARCHITECTURE.md, "Why PHP worker mode runs the script on a stack of its own", has
 * the reasons.
 *
 * The worker script lives in one long PHP request (php_request_startup() at its boot,
 * php_request_shutdown() at its end). Each handled request is a partial request cycle,
 * written from php_request_startup() and php_request_shutdown() (php-src main/main.c):
 * the output layer, SAPI's request (headers, POST data, uploaded files), the superglobals,
 * the modules' request state (scope.c runs their request hooks), the time limit, and the
 * ini values are this request's own; the executor, the compiled code and every object and static of the
 * app are kept. A fatal error, an uncaught exception, or exit() ends the script: the
 * request in flight is completed as classic mode completes it, and the worker exits, so
 * that the zygote forks a fresh one.
 */

#include "sapi.h"

#include <SAPI.h>
#include <php_main.h>
#include <php_output.h>
#include <php_variables.h>
#include <zend_exceptions.h>
#include <zend_ini.h>
#include <ext/random/php_random.h>
#include <ext/spl/spl_exceptions.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>

enum state {
	/* Not a worker-mode worker: frankenphp_handle_request() throws. */
	W_NONE,
	/* The script runs its boot, or its code between two requests. */
	W_RUNNING,
	/* The script waits in frankenphp_handle_request() for a request. */
	W_WAITING,
	/* A request is in the script's hands. */
	W_HANDLING,
	/* The script ended; it is not resumed again. */
	W_ENDED,
};

static enum state state = W_NONE;
static ucontext_t loop_context, script_context;
static const char *script_file;
/* The boot request (the script's own $_SERVER), and the request handed to the script. */
static const struct drover_request *boot_request;
static const struct drover_request *pending;
static double pending_now;
/* frankenphp_handle_request() has been called once: the boot is over. */
static int ready;
/* The worker must stop: the waiting frankenphp_handle_request() returns false. */
static int stopping;
/* The handler of a request runs (frankenphp_handle_request() may not be called in it). */
static int in_handler;
/* The HTTP status of the last request, -1 when it could not start. */
static int last_status;
/* EG(exit_status) when the script ended: 255 after a fatal error. */
static int exit_status;
/* Name -> value (a string, or null for an entry without one) of the ini entries changed
 * when the boot ended, and since by the requests' code: what the request-scoped changes
 * are undone to. */
static HashTable boot_ini;
/* The names of the ini entries the request's start changed (PHP_VALUE, PHP_ADMIN_VALUE,
 * .user.ini): undone at its end, with the request's own limits (REQUEST_SCOPED_INI). */
static HashTable startup_ini;

/* ------------------------------------------------------------ the request cycle */

/* Records `entry`'s current value (a string, or null) as the one requests are undone to. */
static void keep_as_boot_value(const zend_ini_entry *entry)
{
	zval value;
	if (entry->value) {
		ZVAL_STR_COPY(&value, entry->value);
	} else {
		ZVAL_NULL(&value);
	}
	zend_hash_update(&boot_ini, entry->name, &value);
}

/* The ini entries as the boot left them: each request's changes (ini_set, set_time_limit's
 * max_execution_time, ignore_user_abort, PHP_VALUE, .user.ini) are undone to these. */
static void snapshot_ini(void)
{
	zend_hash_init(&startup_ini, 8, NULL, NULL, 0);
	zend_hash_init(&boot_ini, 8, NULL, ZVAL_PTR_DTOR, 0);
	if (!EG(modified_ini_directives)) {
		return;
	}
	zend_ini_entry *entry;
	ZEND_HASH_MAP_FOREACH_PTR(EG(modified_ini_directives), entry) {
		keep_as_boot_value(entry);
	} ZEND_HASH_FOREACH_END();
}

/* The limits php-fpm scopes to one request, whoever changed them: set_time_limit()'s
 * max_execution_time, memory_limit, ignore_user_abort(). */
static const char *const REQUEST_SCOPED_INI[] = {
	"max_execution_time", "memory_limit", "ignore_user_abort", NULL,
};

static int request_scoped(const zend_string *name)
{
	if (zend_hash_exists(&startup_ini, name)) {
		return 1;
	}
	for (const char *const *scoped = REQUEST_SCOPED_INI; *scoped; scoped++) {
		if (zend_string_equals_cstr(name, *scoped, strlen(*scoped))) {
			return 1;
		}
	}
	return 0;
}

/* Whether `entry` holds the value the baseline (`boot_ini`) has for it. */
static int as_at_boot(const zend_ini_entry *entry)
{
	zval *boot = zend_hash_find(&boot_ini, entry->name);
	return boot && (Z_TYPE_P(boot) == IS_NULL
			? entry->value == NULL
			: entry->value && zend_string_equals(entry->value, Z_STR_P(boot)));
}

/* The request's start is over: the entries it changed (PHP_VALUE, PHP_ADMIN_VALUE,
 * .user.ini) are the request's own. */
static void note_startup_ini(void)
{
	zend_hash_clean(&startup_ini);
	if (!EG(modified_ini_directives)) {
		return;
	}
	zend_ini_entry *entry;
	ZEND_HASH_MAP_FOREACH_PTR(EG(modified_ini_directives), entry) {
		if (!as_at_boot(entry)) {
			zend_hash_add_empty_element(&startup_ini, entry->name);
		}
	} ZEND_HASH_FOREACH_END();
}

/* The request's ini changes: those of its start and its limits are undone; what its code
 * set with ini_set() is kept for the next requests, as under FrankenPHP (a service built
 * on the first request, Symfony's session storage, sets session.save_path once and lives
 * on), and is the baseline from now on. */
static void restore_ini(void)
{
	if (!EG(modified_ini_directives)) {
		return;
	}
	/* Collected first: restoring an entry removes it from the table being walked. */
	zend_string **names = NULL;
	size_t count = 0, size = 0;
	zend_ini_entry *entry;
	ZEND_HASH_MAP_FOREACH_PTR(EG(modified_ini_directives), entry) {
		if (as_at_boot(entry)) {
			continue;
		}
		if (!request_scoped(entry->name)) {
			keep_as_boot_value(entry);
			continue;
		}
		if (count == size) {
			size = size ? 2 * size : 8;
			names = erealloc(names, size * sizeof(*names));
		}
		names[count++] = zend_string_copy(entry->name);
	} ZEND_HASH_FOREACH_END();
	for (size_t i = 0; i < count; i++) {
		zval *boot = zend_hash_find(&boot_ini, names[i]);
		if (boot && Z_TYPE_P(boot) == IS_STRING) {
			zend_alter_ini_entry_ex(names[i], Z_STR_P(boot), ZEND_INI_SYSTEM,
						ZEND_INI_STAGE_RUNTIME, 1);
		} else {
			zend_restore_ini_entry(names[i], ZEND_INI_STAGE_RUNTIME);
		}
		zend_string_release(names[i]);
	}
	if (names) {
		efree(names);
	}
}

/* The superglobals of the request `current` names: the old arrays released, new ones built
 * (with auto_globals_jit, $_SERVER, $_ENV and $_REQUEST are made on the compilation of a
 * script that names them, and the app's scripts are compiled already: made now). */
static void build_superglobals(void)
{
	for (int i = 0; i < NUM_TRACK_VARS; i++) {
		zval_ptr_dtor(&PG(http_globals)[i]);
		ZVAL_UNDEF(&PG(http_globals)[i]);
	}
	php_hash_environment();
	zend_is_auto_global_str(ZEND_STRL("_SERVER"));
	zend_is_auto_global_str(ZEND_STRL("_ENV"));
	zend_is_auto_global_str(ZEND_STRL("_REQUEST"));
}

/* Ends the script's output buffers and the output layer, each step past a bailout. */
static void output_end(void)
{
	zend_try {
		php_output_end_all();
	} zend_end_try();
	zend_try {
		php_output_deactivate();
	} zend_end_try();
}

/* The output layer between requests: what the script writes goes to drover's log. */
static void output_between_requests(void)
{
	output_end();
	php_output_activate();
	drover_sapi_output_to_log(1);
}

/* SAPI's request ends, in two steps, as php_request_shutdown() ends it. First the headers
 * list and the POST data (what the script left unread is read, as at a classic request's
 * end); then, once the FastCGI request is ended, the uploaded files (deleted) and the rest
 * (headers_sent is reset there: ending the request after it would send them again). */
static void sapi_request_end(void)
{
	if (SG(request_info).request_body) {
		/* php://input's buffer, a resource of the script's long request: closed here, or
		 * every POST would leave one behind until the worker exits. */
		php_stream_close(SG(request_info).request_body);
		SG(request_info).request_body = NULL;
	}
	zend_try {
		sapi_deactivate_module();
	} zend_end_try();
	/* Freed by sapi_deactivate_module(), which leaves the pointers. */
	SG(request_info).auth_user = NULL;
	SG(request_info).auth_password = NULL;
	SG(request_info).auth_digest = NULL;
	SG(request_info).content_type_dup = NULL;
	SG(request_info).current_user = NULL;
}

static void sapi_request_destroy(void)
{
	sapi_deactivate_destroy();
}

/* A request begins in the booted script (php_request_startup()'s steps that are the
 * request's, not the script's). 0, or -1 when PHP could not start it. */
static int request_startup(const struct drover_request *req, double now)
{
	volatile int failed = 0;
	drover_sapi_output_to_log(0);
	/* The warnings PHP raises while it starts a request (max_input_vars exceeded, a body
	 * over post_max_size, a bad multipart part) reach PHP's own error handler, as in
	 * php-fpm, where no script has run yet: never the handler the boot set, which may
	 * throw (Laravel's does) where nothing can catch it, and end the worker. */
	zval boot_handler;
	ZVAL_COPY_VALUE(&boot_handler, &EG(user_error_handler));
	ZVAL_UNDEF(&EG(user_error_handler));
	drover_scope_begin();
	zend_try {
		output_end();
		drover_sapi_begin(req, now);
		zend_memory_reset_peak_usage();
		PG(in_error_log) = 0;
		PG(during_request_startup) = 1;
		php_output_activate();
		PG(header_is_being_sent) = 0;
		PG(connection_status) = PHP_CONNECTION_NORMAL;
		sapi_activate();
		if (PG(expose_php) && !SG(headers_sent)) {
			sapi_add_header(SAPI_PHP_VERSION_HEADER, sizeof(SAPI_PHP_VERSION_HEADER) - 1, 1);
		}
		if (PG(output_handler) && PG(output_handler)[0]) {
			zval handler;
			ZVAL_STRING(&handler, PG(output_handler));
			php_output_start_user(&handler, 0, PHP_OUTPUT_HANDLER_STDFLAGS);
			zval_ptr_dtor(&handler);
		} else if (PG(output_buffering)) {
			php_output_start_user(NULL, PG(output_buffering) > 1 ? PG(output_buffering) : 0,
					      PHP_OUTPUT_HANDLER_STDFLAGS);
		} else if (PG(implicit_flush)) {
			php_output_set_implicit_flush(1);
		}
		build_superglobals();
		drover_scope_modules_startup();
		note_startup_ini();
		PG(during_request_startup) = 0;
		/* max_execution_time counts from here, for this request alone. */
		zend_set_timeout(INI_INT("max_execution_time"), 0);
	} zend_catch {
		failed = 1;
	} zend_end_try();
	ZVAL_COPY_VALUE(&EG(user_error_handler), &boot_handler);
	return failed ? -1 : 0;
}

/* The first steps of a request's end (and of the boot's): the output flushed, the time
 * limit off, the modules' request shutdown (the session written and closed, $_SESSION
 * gone), the headers sent. */
static void output_and_modules_end(void)
{
	zend_try {
		php_output_end_all();
	} zend_end_try();
	zend_try {
		zend_unset_timeout();
	} zend_end_try();
	drover_scope_modules_shutdown();
	zend_hash_str_del(&EG(symbol_table), ZEND_STRL("_SESSION"));
	zend_try {
		php_output_deactivate();
	} zend_end_try();
}

/* The request ends (its handler returned): the output flushed, the session written, the
 * headers out, SAPI's request state freed, the ini values undone, END_REQUEST sent. */
static void request_shutdown(void)
{
	drover_scope_keep_session_handler();
	output_and_modules_end();
	if (last_status != -1) {
		last_status = SG(sapi_headers).http_response_code;
	}
	sapi_request_end();
	if (!drover_sapi_finished()) {
		drover_sapi_finish();
	}
	sapi_request_destroy();
	restore_ini();
	drover_scope_end();
	drover_sapi_end();
	php_output_activate();
	drover_sapi_output_to_log(1);
}

/* The boot's end, at the first frankenphp_handle_request(): what the boot wrote went to the
 * log; its request's SAPI state is freed, and its ini values are what requests start from. */
static void boot_end(void)
{
	drover_scope_keep_session_handler();
	output_and_modules_end();
	/* The boot has no POST data to read: no server context. */
	SG(server_context) = NULL;
	sapi_request_end();
	sapi_request_destroy();
	snapshot_ini();
	drover_scope_snapshot();
	drover_sapi_end();
	php_output_activate();
	drover_sapi_output_to_log(1);
}

/* ------------------------------------------------------------ the script's stack */

/* Switches from the script's stack to the worker loop's. */
static void yield_to_loop(void)
{
	swapcontext(&script_context, &loop_context);
}

/* The script's whole life, on its own stack. */
static void script_main(void)
{
	volatile int started = 0;
	zend_first_try {
		drover_sapi_begin(boot_request, pending_now);
		drover_sapi_output_to_log(1);
		if (php_request_startup() == SUCCESS) {
			started = 1;
			zend_file_handle file;
			zend_stream_init_filename(&file, script_file);
			php_execute_script(&file);
			zend_destroy_file_handle(&file);
		}
	} zend_end_try();
	/* A request still in flight (a fatal error, an uncaught exception or exit() in its
	 * handler) is completed by the script's request shutdown, as a classic request is: the
	 * output so far, the status PHP set (500 for a fatal error with display_errors off). */
	if (state == W_HANDLING) {
		last_status = SG(sapi_headers).http_response_code;
		drover_sapi_output_to_log(0);
	}
	exit_status = started ? EG(exit_status) : 255;
	if (started) {
		php_request_shutdown(NULL);
	}
	drover_sapi_end();
	drover_sapi_output_to_log(0);
	state = W_ENDED;
	yield_to_loop();
	/* Never resumed. */
	abort();
}

/* The script's stack: as large as the process's own (RLIMIT_STACK, 8 MiB by default;
 * within 1 to 256 MiB), with a guard page below it, so that a runaway recursion ends the
 * worker with SIGSEGV, as it does in classic mode. Pages are taken as they are used. */
static void *script_stack(size_t *size)
{
	struct rlimit limit;
	size_t want = 8 << 20;
	if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
		want = limit.rlim_cur;
	}
	if (want < (1 << 20)) {
		want = 1 << 20;
	}
	if (want > ((size_t) 256 << 20)) {
		want = (size_t) 256 << 20;
	}
	size_t page = (size_t) sysconf(_SC_PAGESIZE);
	want = (want + page - 1) / page * page;
	char *base = mmap(NULL, want + page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (base == MAP_FAILED) {
		return NULL;
	}
	mprotect(base, page, PROT_NONE);
	*size = want;
	return base + page;
}

/* ------------------------------------------------------------ Rust's side */

/* Boots the worker script: runs FILE until its first frankenphp_handle_request(). 0 when
 * the script waits for its first request; else the script ended (or could not run) before
 * it: 1, and the reason is in the log. */
int drover_php_worker_boot(const char *file, const struct drover_request *boot, double now)
{
	size_t size;
	void *stack = script_stack(&size);
	if (!stack) {
		return 1;
	}
	script_file = file;
	boot_request = boot;
	pending_now = now;
	state = W_RUNNING;
	getcontext(&script_context);
	script_context.uc_stack.ss_sp = stack;
	script_context.uc_stack.ss_size = size;
	script_context.uc_link = NULL;
	makecontext(&script_context, script_main, 0);
	swapcontext(&loop_context, &script_context);
	return state == W_WAITING ? 0 : 1;
}

/* Hands one request to the waiting script; returns once the script asks for the next one
 * (or ends): the request's HTTP status, or -1 when PHP could not start it. */
int drover_php_worker_handle(const struct drover_request *req, double now)
{
	if (state != W_WAITING) {
		return -1;
	}
	pending = req;
	pending_now = now;
	last_status = 0;
	swapcontext(&loop_context, &script_context);
	pending = NULL;
	return last_status;
}

/* Whether the script has ended (a fatal error, exit(), or its own end): the worker exits. */
int drover_php_worker_ended(void)
{
	return state == W_ENDED;
}

/* In a worker forked from a zygote that booted the script (worker_boot = "zygote"): what
 * must not be shared with the other workers is made the worker's own. PHP's mt_rand() and
 * lcg_value() seed themselves on first use: the boot may have used (so seeded) them, and
 * every worker would then draw the same numbers. random_bytes() and session ids come from
 * the kernel, per call. */
void drover_php_worker_after_fork(void)
{
	RANDOM_G(mt19937_seeded) = false;
	RANDOM_G(combined_lcg_seeded) = false;
}

/* The worker stops: the waiting frankenphp_handle_request() returns false, the script runs
 * to its end. Returns the script's exit status (EG(exit_status); 255 after a fatal
 * error). */
int drover_php_worker_stop(void)
{
	if (state == W_WAITING) {
		stopping = 1;
		swapcontext(&loop_context, &script_context);
	}
	return exit_status;
}

/* ------------------------------------------------------------ the PHP function */

ZEND_FUNCTION(frankenphp_handle_request)
{
	zend_fcall_info fci;
	zend_fcall_info_cache fcc;
	ZEND_PARSE_PARAMETERS_START(1, 1)
		Z_PARAM_FUNC(fci, fcc)
	ZEND_PARSE_PARAMETERS_END();

	if (state == W_NONE) {
		zend_throw_exception(spl_ce_RuntimeException,
				     "frankenphp_handle_request() called while not in worker mode "
				     "(set the pool's [php] worker)", 0);
		RETURN_THROWS();
	}
	if (in_handler) {
		zend_throw_exception(spl_ce_RuntimeException,
				     "frankenphp_handle_request() called inside a request's handler", 0);
		RETURN_THROWS();
	}
	if (stopping) {
		RETURN_FALSE;
	}
	if (!ready) {
		boot_end();
		ready = 1;
	}
	/* No time limit while it waits: max_execution_time is per request. */
	zend_unset_timeout();
	state = W_WAITING;
	yield_to_loop();
	if (stopping) {
		state = W_RUNNING;
		RETURN_FALSE;
	}
	state = W_HANDLING;
	if (request_startup(pending, pending_now) != 0) {
		/* As classic mode answers a request PHP could not start. */
		last_status = -1;
		if (!SG(headers_sent)) {
			SG(sapi_headers).http_response_code = 500;
		}
		request_shutdown();
		state = W_RUNNING;
		RETURN_TRUE;
	}
	zval retval;
	ZVAL_UNDEF(&retval);
	fci.retval = &retval;
	in_handler = 1;
	if (zend_call_function(&fci, &fcc) == SUCCESS) {
		zval_ptr_dtor(&retval);
	}
	if (EG(exception) && !zend_is_unwind_exit(EG(exception)) &&
	    !zend_is_graceful_exit(EG(exception)) &&
	    Z_TYPE(EG(user_exception_handler)) != IS_UNDEF) {
		/* As classic mode: the handler set_exception_handler() named answers it (the
		 * app's error page), and the request ends as any other. */
		zend_user_exception_handler();
	}
	/* The request's shutdown functions, first thing of its end, as in classic mode (in
	 * the handler's state: they may not call frankenphp_handle_request()). */
	if (!EG(exception) && drover_scope_run_shutdown_functions()) {
		in_handler = 0;
		return;
	}
	in_handler = 0;
	if (EG(exception)) {
		/* exit(): the script unwinds to its end, where the request is completed. */
		if (zend_is_unwind_exit(EG(exception)) || zend_is_graceful_exit(EG(exception))) {
			return;
		}
		/* An uncaught exception is the request's fatal error ("PHP Fatal error: Uncaught
		 * ..."), as in classic mode; reported, then the script is abandoned as a fatal
		 * error abandons it (zend_exception_error reports without bailing out). */
		zend_exception_error(EG(exception), E_ERROR);
		zend_bailout();
	}
	request_shutdown();
	state = W_RUNNING;
	RETURN_TRUE;
}
