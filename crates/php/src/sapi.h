/*
 * What sapi.c (the SAPI: callbacks, classic requests) and worker.c (worker mode) share.
 * Rust's side of the same structs is crates/php/src/ffi.rs.
 */
#ifndef DROVER_SAPI_H
#define DROVER_SAPI_H

#include <php.h>
#include <stddef.h>

/* One FastCGI param, name and value NUL-terminated (Rust keeps them until the request
 * ends). */
struct drover_param {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* What a request gives PHP; every string is NUL-terminated, NULL when absent. */
struct drover_request {
	const struct drover_param *params;
	size_t params_len;
	const char *method;
	const char *query;
	const char *request_uri;
	const char *content_type;
	long long content_length;
	const char *cookie;
	const char *authorization;
	const char *protocol;
	/* The file to run, and PHP_SELF, as drover computed them (crates/php/src/script.rs:
	 * cgi.fix_pathinfo, proxy:fcgi://). The params already hold SCRIPT_FILENAME,
	 * SCRIPT_NAME, PATH_INFO, PATH_TRANSLATED and the ORIG_* copies as php-fpm rewrites
	 * them (with cgi.fix_pathinfo = 0, the file to run may be PATH_TRANSLATED while
	 * $_SERVER['SCRIPT_FILENAME'] stays what was sent). */
	const char *script_filename;
	const char *php_self;
	const char *php_value;
	const char *php_admin_value;
};

/* A request begins: SAPI's request info, the auth data, PHP_VALUE and PHP_ADMIN_VALUE (which
 * PHP reads while it starts the request); the callbacks see `req` until drover_sapi_end(). */
void drover_sapi_begin(const struct drover_request *req, double now);
/* The request's info is cleared; the callbacks see no request. */
void drover_sapi_end(void);
/* Whether fastcgi_finish_request() (or the end of a worker-mode request) ended the FastCGI
 * request already. */
int drover_sapi_finished(void);
/* Ends the FastCGI request now: the output so far and the headers out, END_REQUEST sent;
 * later output is dropped. 0, or -1 when the client is gone. */
int drover_sapi_finish(void);
/* While on, output written with no request open (a worker script's boot, and its code
 * between two requests) goes to drover's log instead of nowhere. */
void drover_sapi_output_to_log(int on);

/* Worker mode (worker.c): frankenphp_handle_request(callable): bool, in sapi.c's function
 * table under that name and drover_handle_request. */
ZEND_FUNCTION(frankenphp_handle_request);

/* Worker mode's request scope (scope.c): the boot's state taken, a request's begun and
 * ended, the shutdown functions a request registered run (nonzero: one called exit()). */
void drover_scope_snapshot(void);
void drover_scope_keep_session_handler(void);
void drover_scope_modules_startup(void);
void drover_scope_modules_shutdown(void);
void drover_scope_begin(void);
void drover_scope_end(void);
int drover_scope_run_shutdown_functions(void);

#endif
