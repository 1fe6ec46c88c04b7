/*
 * Worker mode's request scope: what a request changes in PHP's engine that php-fpm's
 * php_request_shutdown() and the next php_request_startup() would undo, undone at the
 * request's end (or started fresh at its start), so that the next request finds the
 * engine as the worker script's boot left it. docs/php-worker-mode.md ("What each
 * request starts with") has the rule and what is kept on purpose.
 *
 * - The user error and exception handlers, and their stacks (set_error_handler() and
 *   set_exception_handler() push the handler they replace): back to the boot's.
 * - error_get_last(): cleared at the request's start, as every php-fpm request starts.
 * - Shutdown functions a request registers (register_shutdown_function()): run at that
 *   request's end, as in classic mode, then forgotten; the boot's run when the script
 *   ends.
 * - The session save handler registered so far (by the boot, or a request's code, as
 *   Symfony's session storage does once): the next requests' (the session module's
 *   request shutdown releases it with the request's session).
 * - The default stream context (fresh), the stream wrappers (the boot's), the umask (the
 *   boot's), and of standard's state strtok()'s string, the stat cache and the URL
 *   rewriter's variables.
 * - Every module's request state: its request hooks (shutdown, post-deactivate, startup)
 *   run between requests as php-fpm runs them, for every module in PHP's registry but the
 *   few whose hooks also free what the app keeps (kept_modules).
 */

#include "sapi.h"

#include <php_main.h>
#include <zend_exceptions.h>
#include <zend_stack.h>
#include <ext/session/php_session.h>
#include <ext/standard/basic_functions.h>
#include <ext/standard/file.h>
#include <ext/standard/php_filestat.h>
#include <zend_smart_str.h>
#include <ext/standard/url_scanner_ex.h>

#include <stddef.h>
#include <strings.h>

#include <sys/stat.h>

/* The handlers and stack depths the boot left. */
static zval boot_error_handler, boot_exception_handler;
static int boot_error_reporting;
static int boot_error_depth, boot_exception_depth;
/* The first shutdown function index a request may take: those below are the boot's. */
static zend_ulong request_shutdown_from;

/* The save handler registered so far (session_set_save_handler()): the session module's
 * request shutdown, which ends each request's session, releases it. */
static struct {
	int kept;
	zval names[PS_NUM_APIS];
	bool implemented;
	zend_string *class_name;
	const ps_module *mod;
} kept_session;

/* Before the session module's request shutdown (at the boot's end and every request's):
 * the save handler registered so far is kept for the next requests, as the services that
 * registered it are (Symfony's session storage registers its handler once, on the first
 * request that uses the session). A handler registered again replaces it. */
void drover_scope_keep_session_handler(void)
{
	int kept = 0;
	for (int i = 0; i < PS_NUM_APIS; i++) {
		zval_ptr_dtor(&kept_session.names[i]);
		ZVAL_COPY(&kept_session.names[i], &PS(mod_user_names).names[i]);
		kept |= !Z_ISUNDEF(kept_session.names[i]);
	}
	kept_session.kept = kept;
	kept_session.implemented = PS(mod_user_implemented);
	if (kept_session.class_name) {
		zend_string_release(kept_session.class_name);
	}
	kept_session.class_name =
		PS(mod_user_class_name) ? zend_string_copy(PS(mod_user_class_name)) : NULL;
	kept_session.mod = PS(mod);
}

/* After the session module's request startup: the boot's save handler is this request's
 * (a handler the request registers replaces it until the request's end). */
static void restore_session_handler(void)
{
	if (!kept_session.kept) {
		return;
	}
	for (int i = 0; i < PS_NUM_APIS; i++) {
		zval_ptr_dtor(&PS(mod_user_names).names[i]);
		ZVAL_COPY(&PS(mod_user_names).names[i], &kept_session.names[i]);
	}
	PS(mod_user_implemented) = kept_session.implemented;
	if (PS(mod_user_class_name)) {
		zend_string_release(PS(mod_user_class_name));
	}
	PS(mod_user_class_name) =
		kept_session.class_name ? zend_string_copy(kept_session.class_name) : NULL;
	if (kept_session.mod) {
		PS(mod) = kept_session.mod;
	}
}

/* The boot's umask, and its stream wrappers (NULL: PHP's own, the boot changed none): a
 * copy of FG(stream_wrappers), whose entries the table does not own. */
static mode_t boot_umask;
static HashTable *boot_wrappers;

static HashTable *copy_wrappers(HashTable *from)
{
	if (!from) {
		return NULL;
	}
	HashTable *copy = emalloc(sizeof(HashTable));
	zend_hash_init(copy, zend_hash_num_elements(from), NULL, NULL, 0);
	zend_hash_copy(copy, from, NULL);
	return copy;
}

static int same_wrappers(HashTable *a, HashTable *b)
{
	if (!a || !b) {
		return a == b;
	}
	if (zend_hash_num_elements(a) != zend_hash_num_elements(b)) {
		return 0;
	}
	zend_string *name;
	void *wrapper;
	ZEND_HASH_FOREACH_STR_KEY_PTR(a, name, wrapper) {
		if (!name || zend_hash_find_ptr(b, name) != wrapper) {
			return 0;
		}
	} ZEND_HASH_FOREACH_END();
	return 1;
}

/* The streams layer as the boot left it: its wrappers (stream_wrapper_register() and
 * _unregister() in a request are undone), and a fresh default context
 * (stream_context_set_default() in a request, credentials in its options, must not reach
 * the next one; php-fpm frees it with the request's resources). */
static void restore_streams(void)
{
	if (FG(default_context)) {
		zend_list_delete(FG(default_context)->res);
		FG(default_context) = NULL;
	}
	if (same_wrappers(FG(stream_wrappers), boot_wrappers)) {
		return;
	}
	if (FG(stream_wrappers)) {
		zend_hash_destroy(FG(stream_wrappers));
		efree(FG(stream_wrappers));
	}
	FG(stream_wrappers) = copy_wrappers(boot_wrappers);
}

/* The modules whose request hooks also free what the app keeps from one request to the
 * next, or what it holds: their hooks are never run between requests, and what they keep
 * is kept (docs/php-worker-mode.md lists it). Every other module's hooks are run, as
 * php_request_shutdown() and php_request_startup() run them. */
static const char *const kept_modules[] = {
	/* The boot's shutdown functions, putenv(), setlocale(); the request's own parts of
	 * its state are undone apart (restore_standard()). */
	"standard",
	/* spl_autoload_register()'s autoloaders. */
	"SPL",
	/* date_default_timezone_set(), which apps call in their boot. */
	"date",
	/* pcntl_signal()'s handlers. */
	"pcntl",
	/* The archives the app opened, its own code when it ships as a .phar. */
	"Phar",
	/* The callbacks the boot's FFI objects hold. */
	"FFI",
	/* mysqli_report()'s mode, which apps set once with their connection (its startup
	 * sets the default back). */
	"mysqli",
	/* Its startup may restart the cache, under the app's compiled code. */
	"Zend OPcache",
	NULL,
};

/* The modules whose request startup works on the request itself: session (its cookie,
 * session.auto_start) and zlib (zlib.output_compression in the request's output). Their
 * startup runs in the request's startup, the others' right after the last request's
 * shutdown, so that the code between two requests finds them started. */
static const char *const bound_modules[] = { "session", "zlib", NULL };

static int listed(const char *const *list, const char *name)
{
	for (; *list; list++) {
		if (strcasecmp(*list, name) == 0) {
			return 1;
		}
	}
	return 0;
}

/* The modules whose hooks are run between requests, in the registry's order (startup
 * runs in it, shutdown in reverse, as zend_activate_modules() and
 * zend_deactivate_modules() do), and which of them are bound to the request. */
static zend_module_entry **scoped;
static bool *scoped_bound;
static size_t scoped_count;

static void collect_modules(void)
{
	if (scoped) {
		return;
	}
	size_t size = zend_hash_num_elements(&module_registry);
	scoped = pemalloc(size * sizeof(*scoped), 1);
	scoped_bound = pemalloc(size * sizeof(*scoped_bound), 1);
	zend_module_entry *module;
	ZEND_HASH_MAP_FOREACH_PTR(&module_registry, module) {
		if (listed(kept_modules, module->name) ||
		    !(module->request_startup_func || module->request_shutdown_func ||
		      module->post_deactivate_func)) {
			continue;
		}
		scoped_bound[scoped_count] = listed(bound_modules, module->name);
		scoped[scoped_count++] = module;
	} ZEND_HASH_FOREACH_END();
}

/* The request's end (and the boot's), once its output is flushed: the modules' request
 * shutdown, as php_request_shutdown() runs it. */
void drover_scope_modules_shutdown(void)
{
	collect_modules();
	for (size_t i = scoped_count; i-- > 0;) {
		zend_module_entry *module = scoped[i];
		if (module->request_shutdown_func) {
			zend_try {
				module->request_shutdown_func(module->type, module->module_number);
			} zend_end_try();
		}
	}
}

/* Once SAPI's request is over: the modules' post-deactivation, then the request startup
 * of those not bound to a request. */
static void modules_restart(void)
{
	for (size_t i = scoped_count; i-- > 0;) {
		zend_module_entry *module = scoped[i];
		if (module->post_deactivate_func) {
			zend_try {
				module->post_deactivate_func();
			} zend_end_try();
		}
	}
	for (size_t i = 0; i < scoped_count; i++) {
		zend_module_entry *module = scoped[i];
		if (!scoped_bound[i] && module->request_startup_func) {
			zend_try {
				module->request_startup_func(module->type, module->module_number);
			} zend_end_try();
		}
	}
}

/* The URL rewriter's state (output_add_rewrite_var()'s variables, the session id it adds
 * with session.use_trans_sid, its parser's buffers): as its request startup leaves it. */
static void url_rewriter_fresh(url_adapt_state_ex_t *ctx)
{
	smart_str_free(&ctx->tag);
	smart_str_free(&ctx->arg);
	smart_str_free(&ctx->val);
	smart_str_free(&ctx->buf);
	smart_str_free(&ctx->result);
	smart_str_free(&ctx->form_app);
	smart_str_free(&ctx->url_app);
	smart_str_free(&ctx->attr_val);
	memset(ctx, 0, offsetof(url_adapt_state_ex_t, tags));
}

/* What of standard's state is the request's, freed by its request shutdown (which is not
 * run: it frees what the app keeps): strtok()'s string, the stat cache (a file another
 * process changed is stat()ed again), and the URL rewriter's variables. */
static void restore_standard(void)
{
	if (BG(strtok_string)) {
		zend_string_release(BG(strtok_string));
		BG(strtok_string) = NULL;
	}
	BG(strtok_last) = NULL;
	BG(strtok_len) = 0;
	php_clear_stat_cache(0, NULL, 0);
	url_rewriter_fresh(&BG(url_adapt_output_ex));
	url_rewriter_fresh(&BG(url_adapt_session_ex));
}

/* The boot is over: what it set up is what every request starts from. */
void drover_scope_snapshot(void)
{
	modules_restart();
	boot_umask = umask(022);
	umask(boot_umask);
	boot_wrappers = copy_wrappers(FG(stream_wrappers));
	ZVAL_COPY(&boot_error_handler, &EG(user_error_handler));
	ZVAL_COPY(&boot_exception_handler, &EG(user_exception_handler));
	boot_error_reporting = EG(user_error_handler_error_reporting);
	boot_error_depth = zend_stack_count(&EG(user_error_handlers));
	boot_exception_depth = zend_stack_count(&EG(user_exception_handlers));
}

static void clear_last_error(void)
{
	PG(last_error_type) = 0;
	PG(last_error_lineno) = 0;
	if (PG(last_error_message)) {
		zend_string_release(PG(last_error_message));
		PG(last_error_message) = NULL;
	}
	if (PG(last_error_file)) {
		zend_string_release(PG(last_error_file));
		PG(last_error_file) = NULL;
	}
}

/* The index the next shutdown function takes (an empty table's nNextFreeElement is
 * ZEND_LONG_MIN: 0). */
static zend_ulong next_index(const HashTable *functions)
{
	return functions && functions->nNextFreeElement > 0
		? (zend_ulong) functions->nNextFreeElement : 0;
}

/* In the request's startup, its superglobals built: the request startup of the modules
 * bound to it, then what the boot set up in them is back. */
void drover_scope_modules_startup(void)
{
	collect_modules();
	for (size_t i = 0; i < scoped_count; i++) {
		zend_module_entry *module = scoped[i];
		if (scoped_bound[i] && module->request_startup_func) {
			module->request_startup_func(module->type, module->module_number);
		}
	}
	restore_session_handler();
}

/* A request begins: no last error, and the shutdown functions it registers are told apart
 * from the boot's. */
void drover_scope_begin(void)
{
	clear_last_error();
	request_shutdown_from = next_index(BG(user_shutdown_function_names));
}

/* Runs the shutdown functions the request registered, in order (one may register more),
 * and forgets them, as php_request_shutdown() runs a classic request's. On the script's
 * stack: a fatal error in one bails out to the script's end, as in the handler. Returns
 * nonzero when one called exit() (the script then unwinds to its end). */
int drover_scope_run_shutdown_functions(void)
{
	HashTable *functions = BG(user_shutdown_function_names);
	if (!functions) {
		return 0;
	}
	for (zend_ulong i = request_shutdown_from; i < next_index(functions); i++) {
		php_shutdown_function_entry *entry = zend_hash_index_find_ptr(functions, i);
		if (!entry) {
			continue;
		}
		zval retval;
		ZVAL_UNDEF(&retval);
		entry->fci.retval = &retval;
		zend_call_function(&entry->fci, &entry->fci_cache);
		zval_ptr_dtor(&retval);
		/* Run once: the script's end, where an exit() or a fatal error leads, runs the
		 * rest (and the boot's). */
		zend_hash_index_del(functions, i);
		if (EG(exception)) {
			if (zend_is_unwind_exit(EG(exception)) ||
			    zend_is_graceful_exit(EG(exception))) {
				return 1;
			}
			zend_exception_error(EG(exception), E_ERROR);
			zend_bailout();
		}
	}
	/* The next request's take the same indexes again (each deleted once run, the
	 * table's used slots are the boot's again). */
	functions->nNextFreeElement =
		request_shutdown_from ? (zend_long) request_shutdown_from : ZEND_LONG_MIN;
	return 0;
}

/* Pops `stack` (of zvals) down to `depth`, releasing what it held. */
static void pop_to(zend_stack *stack, zend_stack *reporting, int depth)
{
	while (zend_stack_count(stack) > depth) {
		zval *handler = zend_stack_top(stack);
		zval_ptr_dtor(handler);
		zend_stack_del_top(stack);
		if (reporting) {
			zend_stack_del_top(reporting);
		}
	}
}

/* A request ends: the error and exception handlers are the boot's again. A request that
 * restored more handlers than it set took the boot's older ones off their stacks: those
 * are gone, the current ones are the boot's. */
void drover_scope_end(void)
{
	modules_restart();
	restore_standard();
	restore_streams();
	umask(boot_umask);
	pop_to(&EG(user_error_handlers), &EG(user_error_handlers_error_reporting),
	       boot_error_depth);
	pop_to(&EG(user_exception_handlers), NULL, boot_exception_depth);
	zval_ptr_dtor(&EG(user_error_handler));
	ZVAL_COPY(&EG(user_error_handler), &boot_error_handler);
	EG(user_error_handler_error_reporting) = boot_error_reporting;
	zval_ptr_dtor(&EG(user_exception_handler));
	ZVAL_COPY(&EG(user_exception_handler), &boot_exception_handler);
}
