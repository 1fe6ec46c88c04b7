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
 * - The session save handler the boot registered: every request's (the session module's
 *   request shutdown releases it with the request's session).
 */

#include "sapi.h"

#include <php_main.h>
#include <zend_exceptions.h>
#include <zend_stack.h>
#include <ext/session/php_session.h>
#include <ext/standard/basic_functions.h>

/* The handlers and stack depths the boot left. */
static zval boot_error_handler, boot_exception_handler;
static int boot_error_reporting;
static int boot_error_depth, boot_exception_depth;
/* The first shutdown function index a request may take: those below are the boot's. */
static zend_ulong request_shutdown_from;

/* The save handler the boot registered (session_set_save_handler()): the session module's
 * request shutdown, which ends each request's session, releases it. */
static struct {
	int kept;
	zval names[PS_NUM_APIS];
	bool implemented;
	zend_string *class_name;
	const ps_module *mod;
} boot_session;

/* Before the boot's end ends its session: its save handler is kept for every request. */
void drover_scope_keep_session_handler(void)
{
	for (int i = 0; i < PS_NUM_APIS; i++) {
		ZVAL_COPY(&boot_session.names[i], &PS(mod_user_names).names[i]);
		boot_session.kept |= !Z_ISUNDEF(boot_session.names[i]);
	}
	boot_session.implemented = PS(mod_user_implemented);
	boot_session.class_name =
		PS(mod_user_class_name) ? zend_string_copy(PS(mod_user_class_name)) : NULL;
	boot_session.mod = PS(mod);
}

/* After the session module's request startup: the boot's save handler is this request's
 * (a handler the request registers replaces it until the request's end). */
static void restore_session_handler(void)
{
	if (!boot_session.kept) {
		return;
	}
	for (int i = 0; i < PS_NUM_APIS; i++) {
		zval_ptr_dtor(&PS(mod_user_names).names[i]);
		ZVAL_COPY(&PS(mod_user_names).names[i], &boot_session.names[i]);
	}
	PS(mod_user_implemented) = boot_session.implemented;
	if (PS(mod_user_class_name)) {
		zend_string_release(PS(mod_user_class_name));
	}
	PS(mod_user_class_name) =
		boot_session.class_name ? zend_string_copy(boot_session.class_name) : NULL;
	if (boot_session.mod) {
		PS(mod) = boot_session.mod;
	}
}

/* The boot is over: what it set up is what every request starts from. */
void drover_scope_snapshot(void)
{
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

/* The modules' request startup ran: what the boot set up in them is back. */
void drover_scope_modules_started(void)
{
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
	pop_to(&EG(user_error_handlers), &EG(user_error_handlers_error_reporting),
	       boot_error_depth);
	pop_to(&EG(user_exception_handlers), NULL, boot_exception_depth);
	zval_ptr_dtor(&EG(user_error_handler));
	ZVAL_COPY(&EG(user_error_handler), &boot_error_handler);
	EG(user_error_handler_error_reporting) = boot_error_reporting;
	zval_ptr_dtor(&EG(user_exception_handler));
	ZVAL_COPY(&EG(user_exception_handler), &boot_exception_handler);
}
