/*
 * drover-php's SAPI: the part of the PHP runtime that must be C, because PHP's API is
 * mostly macros over its globals (SG(), EG(), PG(), zend_string) and because PHP's error
 * handling (zend_bailout) is a longjmp that must never cross a Rust frame.
 *
 * The boundary (crates/php/src/ffi.rs declares the same):
 * - Rust calls drover_php_startup() once in the zygote, drover_php_admin_ini() for each
 *   [php.admin_ini] value, then drover_php_run() once per request in a worker.
 * - PHP calls this file's SAPI callbacks; they call the drover_php_rs_* functions that Rust
 *   exports (write, flush, read the body, end the request, log). Those only move bytes and
 *   return a status: every PHP call that may bail out (php_handle_aborted_connection) is
 *   made here, after the Rust function has returned.
 *
 * Semantics follow php-fpm (sapi/fpm/fpm/fpm_main.c): the SAPI is named "fpm-fcgi" (OPcache
 * runs only under names it knows), fastcgi_finish_request() and getallheaders() exist,
 * "Status:" is sent when the code is not 200, PHP_VALUE and PHP_ADMIN_VALUE apply ini
 * values. Where drover differs from php-fpm on purpose, the comment says so.
 */

#include <php.h>
#include <SAPI.h>
#include <php_main.h>
#include <php_variables.h>
#include <php_ini.h>
#include <php_output.h>
#include <zend_ini.h>
#include <zend_ini_scanner.h>
#include <zend_smart_str.h>
#include <zend_exceptions.h>
#include <ext/standard/head.h>
#include <http_status_codes.h>

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sapi.h"

/* Exported by Rust (crates/php/src/request.rs). Each returns 0 on success, -1 when the
 * client is gone. */
extern int drover_php_rs_write(const char *data, size_t len);
extern int drover_php_rs_flush(void);
extern size_t drover_php_rs_read_body(char *buf, size_t len);
extern int drover_php_rs_finish(void);
extern void drover_php_rs_log(const char *message, size_t len);

static const struct drover_request *current;
/* fastcgi_finish_request() has ended the FastCGI request: output from now on is dropped. */
static int finished;
/* The peak memory of the request drover_php_run() ran last (0: PHP did not run it), read
 * by drover_deactivate() before php_request_shutdown() resets the allocator's peak. */
static size_t request_peak;
/* When the request began (SAPI's request time), in seconds since the epoch. */
static double request_time;

/* ---------------------------------------------------------------- SAPI callbacks */

/* php-fpm's cgi.* and fastcgi.* settings, at the end of this file. */
static zend_module_entry drover_cgi_module;

static int drover_startup(sapi_module_struct *module)
{
	return php_module_startup(module, &drover_cgi_module);
}

/* Output with no request open goes to drover's log (see drover_sapi_output_to_log). */
static int output_to_log;

void drover_sapi_output_to_log(int on)
{
	output_to_log = on;
}

static size_t drover_ub_write(const char *str, size_t len)
{
	if (output_to_log) {
		ssize_t ignored = write(2, str, len);
		(void) ignored;
		return len;
	}
	if (finished) {
		/* php-fpm ends the script here unless ignore_user_abort is on; drover drops the
		 * output, which is what code that calls fastcgi_finish_request() expects. */
		return len;
	}
	if (drover_php_rs_write(str, len) != 0) {
		php_handle_aborted_connection();
		return 0;
	}
	return len;
}

/* The request's end, inside php_request_shutdown() (sapi_deactivate_module): after the
 * shutdown functions and destructors ran, so that their memory counts as the script's, and
 * before shutdown_memory_manager() resets the peak for the next request (once
 * drover_php_run() returns, the peak reads 0). php-fpm reads it earlier, before
 * php_request_shutdown().
 *
 * Differs from php-fpm on purpose: php-fpm reports zend_memory_peak_usage(1), the memory
 * the allocator took from the system, which comes in 2 MiB chunks (and counts from the
 * chunks it kept cached from earlier requests): every small request reads 2097152. This is
 * zend_memory_peak_usage(0), the script's own peak, what memory_get_peak_usage() returns
 * (measured with PHP 8.2: hello world 384 to 415 KB, a 20 MiB string 21.3 MB, where
 * php-fpm's reading is 2097152 and 23072768). */
static int drover_deactivate(void)
{
	request_peak = zend_memory_peak_usage(0);
	return SUCCESS;
}

static void drover_flush(void *server_context)
{
	(void) server_context;
	if (!finished && current && drover_php_rs_flush() != 0) {
		php_handle_aborted_connection();
	}
}

/* The reason php-fpm gives a code in its "Status:" line: PHP's own table (the one the
 * php-fpm of the same PHP build uses), NULL for a code not in it, which php-fpm sends
 * bare ("Status: 418"; nginx then answers "418 " with no reason). */
static const char *status_reason(int code)
{
	for (const http_response_status_code_pair *p = http_status_map; p->code; p++) {
		if (p->code == code) {
			return p->str;
		}
	}
	return NULL;
}

/* A "Status:" header of the script's own (header("Status: 404 Not Found")). */
static int is_status_header(const sapi_header_struct *h)
{
	return h->header_len > 7 && strncasecmp(h->header, "Status:", 7) == 0;
}

/* The "Status:" line php-fpm's sapi_cgi_send_headers writes first, when the response code
 * is not 200: the script's "HTTP/x NNN reason" line as "Status: NNN reason" (its code
 * then decides a 304), else PHP's reason for the code, unless the script sent a Status:
 * header of its own. Returns the code that decides a 304; *sent says whether a Status:
 * line is out (the script's Status: headers are then dropped, as php-fpm drops them). */
static int status_line(const sapi_headers_struct *headers, smart_str *out, int *sent)
{
	int code = headers->http_response_code;
	const char *line = headers->http_status_line;
	const char *space = line ? strchr(line, ' ') : NULL;
	zend_llist_position pos;
	sapi_header_struct *h;

	*sent = 0;
	if (code == 200) {
		return code;
	}
	if (space && space - line >= 5 && strncasecmp(line, "HTTP/", 5) == 0) {
		smart_str_append_printf(out, "Status:%s\r\n", space);
		*sent = 1;
		return atoi(space + 1);
	}
	for (h = zend_llist_get_first_ex((zend_llist *) &headers->headers, &pos); h;
	     h = zend_llist_get_next_ex((zend_llist *) &headers->headers, &pos)) {
		if (is_status_header(h)) {
			return code;
		}
	}
	const char *reason = status_reason(code);
	if (reason) {
		smart_str_append_printf(out, "Status: %d %s\r\n", code, reason);
	} else {
		smart_str_append_printf(out, "Status: %d\r\n", code);
	}
	*sent = 1;
	return code;
}

/* A body PHP refused (over post_max_size, so not read at the request's start) is read to
 * its end and dropped before the response's head goes out, at the speed it arrives, as
 * php-fpm does by keeping its response in its buffer until the request's end drained the
 * body. Read after the head instead (at the request's end, where PHP drains it), it would
 * never come: nginx stops sending a request's body once it has the response's head, and
 * the worker would wait request_read_timeout for it. A script that reads php://input
 * before its first output still gets the body, as under php-fpm. */
static void drain_refused_body(void)
{
	if (SG(post_read) || SG(post_max_size) <= 0 ||
	    SG(request_info).content_length <= SG(post_max_size)) {
		return;
	}
	char dummy[SAPI_POST_BLOCK_SIZE];
	while (sapi_read_post_block(dummy, sizeof(dummy)) == sizeof(dummy)) {
	}
}

/* The CGI header block, as php-fpm writes it: the Status: line (status_line), every
 * header in the order the script set them (only the first Status: header, when no Status:
 * line went first), then the blank line. A 304 goes without Content-Type (PHP's default
 * one, or the script's): a cache that took a 304's text/html would apply it to the stored
 * body (a CSS or JSON file). */
static int drover_send_headers(sapi_headers_struct *headers)
{
	smart_str out = {0};
	zend_llist_position pos;
	sapi_header_struct *h;
	int status_sent;

	if (finished || !current || output_to_log) {
		return SAPI_HEADER_SENT_SUCCESSFULLY;
	}
	drain_refused_body();
	int not_modified = status_line(headers, &out, &status_sent) == 304;
	for (h = zend_llist_get_first_ex(&headers->headers, &pos); h;
	     h = zend_llist_get_next_ex(&headers->headers, &pos)) {
		if (!h->header_len) {
			continue;
		}
		if (is_status_header(h)) {
			if (status_sent) {
				continue;
			}
			status_sent = 1;
		} else if (not_modified && h->header_len > 13 &&
			   strncasecmp(h->header, "Content-Type:", 13) == 0) {
			continue;
		}
		smart_str_appendl(&out, h->header, h->header_len);
		smart_str_appendl(&out, "\r\n", 2);
	}
	smart_str_appendl(&out, "\r\n", 2);
	smart_str_0(&out);
	int failed = drover_php_rs_write(ZSTR_VAL(out.s), ZSTR_LEN(out.s)) != 0;
	smart_str_free(&out);
	if (failed) {
		php_handle_aborted_connection();
		return SAPI_HEADER_SEND_FAILED;
	}
	return SAPI_HEADER_SENT_SUCCESSFULLY;
}

static size_t drover_read_post(char *buffer, size_t count)
{
	size_t done = 0;
	while (done < count) {
		size_t n = drover_php_rs_read_body(buffer + done, count - done);
		if (n == 0) {
			break;
		}
		done += n;
	}
	return done;
}

static char *drover_read_cookies(void)
{
	return current ? (char *) current->cookie : NULL;
}

/* The index of the last param named `name` (a name sent twice: the last, as php-fpm's
 * params table and $_SERVER keep it; nginx sends both of a fastcgi_param set in
 * fastcgi.conf and again in a location), or -1. */
static ptrdiff_t find_param(const char *name, size_t name_len, size_t before)
{
	for (size_t i = before; i > 0; i--) {
		const struct drover_param *p = &current->params[i - 1];
		if (p->name_len == name_len && memcmp(p->name, name, name_len) == 0) {
			return (ptrdiff_t) i - 1;
		}
	}
	return -1;
}

/* FCGI_ROLE, which php-fpm's FastCGI layer adds to every request's params. */
static const char fcgi_role[] = "RESPONDER";

static char *drover_getenv(const char *name, size_t name_len)
{
	if (!current) {
		return NULL;
	}
	ptrdiff_t at = find_param(name, name_len, current->params_len);
	if (at >= 0) {
		return (char *) current->params[at].value;
	}
	if (name_len == sizeof("FCGI_ROLE") - 1 && memcmp(name, "FCGI_ROLE", name_len) == 0) {
		return (char *) fcgi_role;
	}
	return NULL;
}

static void register_one(const char *name, const char *value, size_t len, zval *array)
{
	size_t new_len;
	char *filtered = estrndup(value, len);
	if (sapi_module.input_filter(PARSE_SERVER, name, &filtered, len, &new_len)) {
		php_register_variable_safe(name, filtered, new_len, array);
	}
	efree(filtered);
}

/* PHP's own import of the process environment (environ), which php-fpm calls first. */
static void (*import_environ)(zval *array);

static void register_params(zval *array)
{
	if (!current) {
		return;
	}
	for (size_t i = 0; i < current->params_len; i++) {
		const struct drover_param *p = &current->params[i];
		register_one(p->name, p->value, p->value_len, array);
	}
	/* After the params, where php-fpm's $_SERVER has it (its table lists the params
	 * newest first, and FCGI_ROLE went in before them). */
	const char *role = drover_getenv("FCGI_ROLE", sizeof("FCGI_ROLE") - 1);
	register_one("FCGI_ROLE", role, strlen(role), array);
}

/* $_ENV (when variables_order has "E"), as php-fpm fills it: the environment, then the
 * FastCGI params. */
static void import_environment(zval *array)
{
	import_environ(array);
	register_params(array);
}

static void drover_register_variables(zval *array)
{
	/* As php-fpm: the worker's environment first (with clear_env, the pool's [env]), then
	 * the FastCGI params, which win over a variable of the same name. */
	import_environ(array);
	register_params(array);
	if (!current) {
		return;
	}
	/* The path variables are in the params as php-fpm rewrote them; PHP_SELF is not a
	 * param. */
	if (current->php_self) {
		register_one("PHP_SELF", current->php_self, strlen(current->php_self), array);
	}
}

/* ---------------------------------------------------------------- per-directory ini */

/* One directory's .user.ini values (from the document root down to it), and until when
 * they hold (user_ini.cache_ttl after they were read, as php-fpm keeps them). */
struct user_ini {
	HashTable values;
	time_t expires;
};

/* Directory (with its trailing slash) -> struct user_ini; persistent, in each worker (the
 * zygote's is empty when it forks). */
static HashTable user_ini_cache;

/* Reads the .user.ini files that apply in `dir` (which ends with a slash): those of the
 * document root and of every directory below it down to `dir`, outer ones first so that
 * an inner file wins; only `dir`'s own when it is outside the document root (php-fpm). */
static void read_user_ini(char *dir, size_t dir_len, const char *root, size_t root_len,
			  HashTable *into)
{
	/* root_len 0: the document root is "/", and every directory is inside. */
	int inside = dir_len > root_len && memcmp(dir, root, root_len) == 0 && dir[root_len] == '/';
	size_t from = inside ? root_len : dir_len - 1;
	HashTable parsed;
	zend_hash_init(&parsed, 8, NULL, config_zval_dtor, 1);
	for (size_t i = from; i < dir_len; i++) {
		if (dir[i] != '/') {
			continue;
		}
		/* Each directory without its trailing slash, "/" for the root itself. */
		char saved = dir[i ? i : 1];
		dir[i ? i : 1] = '\0';
		php_parse_user_ini_file(dir, PG(user_ini_filename), &parsed);
		dir[i ? i : 1] = saved;
	}
	/* Copied into strings of the worker's lifetime: PHP's parser may give names and values
	 * that live only as long as this request (its interned strings), and the cache outlives
	 * it. */
	zend_string *name;
	zval *value;
	ZEND_HASH_FOREACH_STR_KEY_VAL(&parsed, name, value) {
		if (!name || Z_TYPE_P(value) != IS_STRING) {
			continue;
		}
		zval copy;
		ZVAL_STR(&copy, zend_string_init(Z_STRVAL_P(value), Z_STRLEN_P(value), 1));
		zend_hash_str_update(into, ZSTR_VAL(name), ZSTR_LEN(name), &copy);
	} ZEND_HASH_FOREACH_END();
	zend_hash_destroy(&parsed);
}

/* The values of the .user.ini files for `dir`, from the cache while they hold. */
static HashTable *user_ini_for(char *dir, size_t dir_len, const char *root, size_t root_len)
{
	time_t now = (time_t) request_time;
	struct user_ini *entry = zend_hash_str_find_ptr(&user_ini_cache, dir, dir_len);
	if (!entry) {
		entry = pemalloc(sizeof(*entry), 1);
		zend_hash_init(&entry->values, 8, NULL, config_zval_dtor, 1);
		entry->expires = 0;
		zend_hash_str_update_ptr(&user_ini_cache, dir, dir_len, entry);
	}
	if (now > entry->expires) {
		zend_hash_clean(&entry->values);
		read_user_ini(dir, dir_len, root, root_len, &entry->values);
		entry->expires = now + PG(user_ini_cache_ttl);
	}
	return &entry->values;
}

/* The request's per-host and per-directory configuration, as php-fpm's activate callback
 * applies it (inside php_request_startup(), so undone at the request's end): php.ini's
 * [HOST=name] section for SERVER_NAME, its [PATH=/dir] sections for the script's directory
 * and those above it, then the .user.ini files from DOCUMENT_ROOT down to the script's
 * directory (user_ini.filename; only PHP_INI_PERDIR and PHP_INI_USER settings; a setting
 * [php.admin_ini] or PHP_ADMIN_VALUE locked stays). */
static int drover_activate(void)
{
	const char *script = SG(request_info).path_translated;
	if (!current || !script) {
		return SUCCESS;
	}
	if (php_ini_has_per_host_config()) {
		const char *host = drover_getenv("SERVER_NAME", sizeof("SERVER_NAME") - 1);
		if (host) {
			size_t len = strlen(host);
			char *lower = estrndup(host, len);
			zend_str_tolower(lower, len);
			php_ini_activate_per_host_config(lower, len);
			efree(lower);
		}
	}
	int user_ini = PG(user_ini_filename) && *PG(user_ini_filename);
	if (!php_ini_has_per_dir_config() && !user_ini) {
		return SUCCESS;
	}
	/* The script's directory with its trailing slash: "/srv/www/app/". */
	const char *slash = strrchr(script, '/');
	if (!slash) {
		return SUCCESS;
	}
	size_t dir_len = (size_t) (slash - script) + 1;
	char *dir = estrndup(script, dir_len);
	php_ini_activate_per_dir_config(dir, dir_len);
	if (user_ini) {
		const char *root = drover_getenv("DOCUMENT_ROOT", sizeof("DOCUMENT_ROOT") - 1);
		if (root) {
			size_t root_len = strlen(root);
			while (root_len > 0 && root[root_len - 1] == '/') {
				root_len--;
			}
			HashTable *values = user_ini_for(dir, dir_len, root, root_len);
			php_ini_activate_config(values, PHP_INI_PERDIR, PHP_INI_STAGE_HTACCESS);
		}
	}
	efree(dir);
	return SUCCESS;
}

/* PHP's log: "PHP message: ..." into the web server's error log (FCGI_STDERR, as php-fpm
 * with fastcgi.logging) during a request, and into drover's log always. */
static void drover_log_message(const char *message, int syslog_type)
{
	(void) syslog_type;
	drover_php_rs_log(message, strlen(message));
}

static zend_result drover_get_request_time(double *out)
{
	*out = request_time;
	return SUCCESS;
}

/* ---------------------------------------------------------------- functions */

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_fastcgi_finish_request, 0, 0, _IS_BOOL, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_getallheaders, 0, 0, IS_ARRAY, 0)
ZEND_END_ARG_INFO()

/* Sends the response so far and ends the FastCGI request; the script runs on. */
ZEND_FUNCTION(fastcgi_finish_request)
{
	ZEND_PARSE_PARAMETERS_NONE();
	if (finished || !current || output_to_log) {
		RETURN_FALSE;
	}
	RETURN_BOOL(drover_sapi_finish() == 0);
}

int drover_sapi_finished(void)
{
	return finished;
}

int drover_sapi_finish(void)
{
	php_output_end_all();
	php_header();
	finished = 1;
	return drover_php_rs_finish();
}

/* The request's headers, from the HTTP_* params (HTTP_X_FORWARDED_FOR is X-Forwarded-For)
 * and CONTENT_TYPE and CONTENT_LENGTH, in php-fpm's order: its params table lists them
 * newest first (nginx sends the client's headers in their order, after its own
 * params: getallheaders() starts with the client's last header), a name sent twice at
 * its first place with its last value. */
ZEND_FUNCTION(getallheaders)
{
	ZEND_PARSE_PARAMETERS_NONE();
	array_init(return_value);
	if (!current) {
		return;
	}
	for (size_t i = current->params_len; i > 0; i--) {
		const struct drover_param *p = &current->params[i - 1];
		if (find_param(p->name, p->name_len, i - 1) >= 0) {
			continue;
		}
		p = &current->params[find_param(p->name, p->name_len, current->params_len)];
		const char *name = NULL;
		size_t len = 0;
		if (p->name_len > 5 && memcmp(p->name, "HTTP_", 5) == 0) {
			name = p->name + 5;
			len = p->name_len - 5;
		} else if (strcmp(p->name, "CONTENT_TYPE") == 0 || strcmp(p->name, "CONTENT_LENGTH") == 0) {
			name = p->name;
			len = p->name_len;
		} else {
			continue;
		}
		char *header = estrndup(name, len);
		int upper = 1;
		for (size_t j = 0; j < len; j++) {
			if (header[j] == '_') {
				header[j] = '-';
				upper = 1;
			} else {
				header[j] = upper ? toupper((unsigned char) header[j])
						  : tolower((unsigned char) header[j]);
				upper = 0;
			}
		}
		add_assoc_stringl_ex(return_value, header, len, (char *) p->value, p->value_len);
		efree(header);
	}
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_handle_request, 0, 1, _IS_BOOL, 0)
	ZEND_ARG_TYPE_INFO(0, callback, IS_CALLABLE, 0)
ZEND_END_ARG_INFO()

/* FrankenPHP's names too (frankenphp_finish_request, frankenphp_request_headers), so that
 * scripts written for its worker mode run unchanged. */
static const zend_function_entry drover_functions[] = {
	ZEND_FE(fastcgi_finish_request, arginfo_fastcgi_finish_request)
	ZEND_FALIAS(frankenphp_finish_request, fastcgi_finish_request, arginfo_fastcgi_finish_request)
	ZEND_FE(getallheaders, arginfo_getallheaders)
	ZEND_FALIAS(apache_request_headers, getallheaders, arginfo_getallheaders)
	ZEND_FALIAS(frankenphp_request_headers, getallheaders, arginfo_getallheaders)
	ZEND_FE(frankenphp_handle_request, arginfo_handle_request)
	ZEND_FALIAS(drover_handle_request, frankenphp_handle_request, arginfo_handle_request)
	ZEND_FE_END
};

/* ---------------------------------------------------------------- the module */

static sapi_module_struct drover_sapi = {
	"fpm-fcgi",			/* name: OPcache only runs under SAPI names it knows */
	"drover (FastCGI, php-fpm compatible)",
	drover_startup,
	php_module_shutdown_wrapper,
	drover_activate,
	drover_deactivate,
	drover_ub_write,
	drover_flush,
	NULL,				/* get_stat */
	drover_getenv,
	php_error,
	NULL,				/* header_handler */
	drover_send_headers,
	NULL,				/* send_header */
	drover_read_post,
	drover_read_cookies,
	drover_register_variables,
	drover_log_message,
	drover_get_request_time,
	NULL,				/* terminate_process */
	STANDARD_SAPI_MODULE_PROPERTIES
};

/* Starts PHP: php.ini from `ini_path` (NULL: PHP's own search), then `ini_entries`
 * ("name=value\n" lines, php-fpm's php_value from the pool file). Returns 0 on success. */
int drover_php_startup(const char *ini_path, const char *ini_entries)
{
#ifdef ZEND_SIGNALS
	zend_signal_startup();
#endif
	sapi_startup(&drover_sapi);
	if (ini_path) {
		drover_sapi.php_ini_path_override = strdup(ini_path);
	}
	if (ini_entries && *ini_entries) {
		drover_sapi.ini_entries = strdup(ini_entries);
	}
	drover_sapi.additional_functions = drover_functions;
	if (drover_sapi.startup(&drover_sapi) == FAILURE) {
		return -1;
	}
	zend_hash_init(&user_ini_cache, 8, NULL, NULL, 1);
	import_environ = php_import_environment_variables;
	php_import_environment_variables = import_environment;
	return 0;
}

/* Writes one line to drover's log (the worker's stderr), in one write so that it stays
 * whole. */
static void log_line(const char *format, ...)
{
	char line[1024];
	va_list args;
	va_start(args, format);
	int n = vsnprintf(line, sizeof(line) - 1, format, args);
	va_end(args);
	if (n < 0) {
		return;
	}
	if ((size_t) n > sizeof(line) - 2) {
		n = (int) sizeof(line) - 2;
	}
	line[n++] = '\n';
	ssize_t ignored = write(2, line, (size_t) n);
	(void) ignored;
}

/* disable_classes: every class named in a list separated by commas or spaces. */
static void disable_classes(const char *list)
{
	const char *at = list;
	while (*at) {
		size_t len = strcspn(at, ", ");
		if (len) {
			zend_disable_class(at, len);
		}
		at += len;
		at += strspn(at, ", ");
	}
}

/* Whether the extension a php.ini `extension=` value names ("apcu", "apcu.so" or a path)
 * is loaded: PHP only warns when it cannot load one at startup. */
int drover_php_extension_loaded(const char *value)
{
	const char *base = strrchr(value, '/');
	base = base ? base + 1 : value;
	size_t len = strlen(base);
	if (len > 3 && strcmp(base + len - 3, ".so") == 0) {
		len -= 3;
	}
	char lower[256];
	if (len >= sizeof(lower)) {
		return 0;
	}
	zend_str_tolower_copy(lower, base, len);
	return zend_hash_str_exists(&module_registry, lower, len);
}

/* php_admin_value from the pool file, in the zygote once PHP has started: sets the value
 * for good and makes it one that no script (ini_set), no .user.ini and no PHP_VALUE can
 * change. disable_functions and disable_classes, which PHP applies only at its startup,
 * are applied here as php-fpm applies its pool's values (fpm_php.c), so a disabled
 * function is gone from every worker ("Call to undefined function"). Returns 0, -1 for a
 * name PHP has no setting for, -2 for a value the setting refuses. (An `extension` is
 * loaded at startup instead, with the [php.ini] values: see zygote.rs.) */
int drover_php_admin_ini(const char *name, const char *value)
{
	zend_ini_entry *entry = zend_hash_str_find_ptr(EG(ini_directives), name, strlen(name));
	if (!entry) {
		return -1;
	}
	zend_string *dup = zend_string_init(value, strlen(value), 1);
	if (entry->on_modify &&
	    entry->on_modify(entry, dup, entry->mh_arg1, entry->mh_arg2, entry->mh_arg3,
			     ZEND_INI_STAGE_ACTIVATE) != SUCCESS) {
		zend_string_release_ex(dup, 1);
		return -2;
	}
	entry->value = dup;
	entry->modifiable = ZEND_INI_SYSTEM;
	if (strcmp(name, "disable_functions") == 0) {
		zend_disable_functions(value);
	} else if (strcmp(name, "disable_classes") == 0) {
		disable_classes(value);
	}
	return 0;
}

/* PHP_VALUE and PHP_ADMIN_VALUE: "name=value" lines, applied for this request only
 * (php-fpm changes the worker's values for good, so one request's PHP_VALUE leaks into
 * the next ones that worker serves; drover's are undone at the end of the request).
 * PHP_VALUE may set what a .user.ini may (PHP_INI_PERDIR and PHP_INI_ALL entries) and not
 * what [php.admin_ini] locked; PHP_ADMIN_VALUE may set any entry, and locks it. A value
 * that is not set is logged, naming the setting, as php-fpm logs it. */
static void apply_ini_line(zval *name, zval *value, zval *unused, int type, void *arg)
{
	(void) unused;
	int admin = *(int *) arg;
	const char *param = admin ? "PHP_ADMIN_VALUE" : "PHP_VALUE";
	if (type != ZEND_INI_PARSER_ENTRY || !name || Z_TYPE_P(name) != IS_STRING) {
		log_line("%s: only name=value lines are allowed; a line was ignored", param);
		return;
	}
	const char *key = Z_STRVAL_P(name);
	if (!value) {
		log_line("%s: unable to set '%s': no value", param, key);
		return;
	}
	zend_ini_entry *entry = zend_hash_find_ptr(EG(ini_directives), Z_STR_P(name));
	if (!entry) {
		log_line("%s: unable to set '%s': PHP has no such setting", param, key);
		return;
	}
	/* PHP applies these two only at its startup, and a per-request value cannot be undone
	 * at the request's end: php-fpm applies them to the worker for good, so one request's
	 * value would hold for every later request that worker serves. */
	if (strcmp(key, "disable_functions") == 0 || strcmp(key, "disable_classes") == 0) {
		log_line("%s: unable to set '%s': set it in the pool's [php.admin_ini]", param, key);
		return;
	}
	int mode = admin ? ZEND_INI_SYSTEM : ZEND_INI_PERDIR;
	if (!(entry->modifiable & mode)) {
		log_line("%s: unable to set '%s': %s may not change it (a PHP_INI_SYSTEM setting, or "
			 "one [php.admin_ini] locked)", param, key, param);
		return;
	}
	zend_string *text = zval_get_string(value);
	if (zend_alter_ini_entry_chars_ex(Z_STR_P(name), ZSTR_VAL(text), ZSTR_LEN(text), mode,
					  admin ? ZEND_INI_STAGE_ACTIVATE : ZEND_INI_STAGE_HTACCESS,
					  0) != SUCCESS) {
		log_line("%s: unable to set '%s': PHP refuses the value \"%s\"", param, key,
			 ZSTR_VAL(text));
	}
	zend_string_release(text);
}

static void apply_ini(const char *lines, int admin)
{
	if (!lines || !*lines) {
		return;
	}
	size_t len = strlen(lines);
	char *copy = emalloc(len + 2);
	memcpy(copy, lines, len);
	copy[len] = '\n';
	copy[len + 1] = '\0';
	zend_parse_ini_string(copy, 1, ZEND_INI_SCANNER_NORMAL, apply_ini_line, &admin);
	efree(copy);
}

void drover_sapi_begin(const struct drover_request *req, double now)
{
	current = req;
	finished = 0;
	request_peak = 0;
	request_time = now;

	SG(server_context) = (void *) req;
	SG(request_info).request_method = req->method;
	SG(request_info).query_string = (char *) req->query;
	SG(request_info).request_uri = (char *) req->request_uri;
	SG(request_info).content_type = req->content_type;
	SG(request_info).content_length = req->content_length;
	SG(request_info).path_translated = (char *) req->script_filename;
	SG(request_info).proto_num =
		req->protocol && strcmp(req->protocol, "HTTP/1.0") == 0 ? 1000 : 1001;
	SG(sapi_headers).http_response_code = 200;
	php_handle_auth_data(req->authorization);
	/* Before the request starts, as php-fpm: what PHP reads while it starts the request
	 * (post_max_size, upload_max_filesize, max_input_vars, enable_post_data_reading,
	 * output_buffering, variables_order) takes them. PHP records each change, and
	 * php_request_shutdown() (worker mode: the request's end) undoes them. */
	apply_ini(req->php_value, 0);
	apply_ini(req->php_admin_value, 1);
}

void drover_sapi_end(void)
{
	SG(server_context) = NULL;
	SG(request_info).request_method = NULL;
	SG(request_info).query_string = NULL;
	SG(request_info).request_uri = NULL;
	SG(request_info).content_type = NULL;
	SG(request_info).path_translated = NULL;
	current = NULL;
}

/* Runs one request's script. Returns the HTTP status PHP answered with, or -1 when PHP
 * could not start the request. */
int drover_php_run(const struct drover_request *req, double now)
{
	int status;
	/* volatile: read after a bailout's longjmp. */
	volatile int started = 0;
	zend_first_try {
		drover_sapi_begin(req, now);
		if (php_request_startup() == SUCCESS) {
			started = 1;
			zend_file_handle file;
			zend_stream_init_filename(&file, req->script_filename);
			php_execute_script(&file);
			zend_destroy_file_handle(&file);
		}
	} zend_end_try();

	if (started) {
		status = SG(sapi_headers).http_response_code;
		php_request_shutdown(NULL);
	} else {
		status = -1;
		/* No request shutdown to undo PHP_VALUE: undone here, so that the next request
		 * does not inherit it. */
		zend_ini_deactivate();
	}
	drover_sapi_end();
	return status;
}

/* Peak memory of the request that just ended (php-fpm's "last request memory"), in
 * bytes; 0 when PHP did not run it. */
size_t drover_php_peak_memory(void)
{
	return request_peak;
}

const char *drover_php_version(void)
{
	return PHP_VERSION;
}

/* ------------------------------------------------------- the stack, on SIGUSR2 and SIGUSR1 */

#include <pthread.h>
#include <stddef.h>
#include <sys/uio.h>

/* Appends without allocating: this runs in a signal handler. */
struct out {
	char buf[16384];
	size_t len;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (n > sizeof(o->buf) - o->len) {
		n = sizeof(o->buf) - o->len;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static void put_str(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_uint(struct out *o, unsigned long v)
{
	char digits[24];
	size_t n = 0;
	do {
		digits[sizeof(digits) - 1 - n++] = (char) ('0' + v % 10);
		v /= 10;
	} while (v && n < sizeof(digits));
	put(o, digits + sizeof(digits) - n, n);
}

/* Reads `len` bytes at `addr` of this process's memory, or fails (returns -1) where a plain
 * read would fault: the stack is read while the script runs on, so a pointer may be stale. */
static int peek(const void *addr, void *out, size_t len)
{
	struct iovec local = { out, len };
	struct iovec remote = { (void *) addr, len };
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t) len ? 0 : -1;
}

/* Appends a zend_string read through peek, at most 512 bytes of it. */
static void put_zstr(struct out *o, const zend_string *s)
{
	size_t len;
	char val[512];
	if (!s || peek((const char *) s + offsetof(zend_string, len), &len, sizeof(len)) != 0) {
		put_str(o, "?");
		return;
	}
	if (len > sizeof(val)) {
		len = sizeof(val);
	}
	if (peek((const char *) s + offsetof(zend_string, val), val, len) != 0) {
		put_str(o, "?");
		return;
	}
	put(o, val, len);
}

/* The file and line a frame is at: its own if it runs user code, else its nearest user
 * caller's (an internal function shows where it was called, as php-fpm's slowlog does). */
static void put_where(struct out *o, const zend_execute_data *at)
{
	for (int hops = 0; at && hops < 200; hops++) {
		zend_execute_data ex;
		zend_function fn;
		if (peek(at, &ex, sizeof(ex)) != 0) {
			break;
		}
		if (ex.func && peek(ex.func, &fn, sizeof(fn)) == 0 && ZEND_USER_CODE(fn.common.type)) {
			uint32_t line = fn.op_array.line_start;
			if (ex.opline) {
				peek((const char *) ex.opline + offsetof(zend_op, lineno), &line, sizeof(line));
			}
			put_zstr(o, fn.op_array.filename);
			put_str(o, ":");
			put_uint(o, line);
			return;
		}
		at = ex.prev_execute_data;
	}
	put_str(o, "[internal]:0");
}

/* Writes the running script's stack to stderr as drover_proto's frame lines
 * ("\x1e" "frame FUNCTION() FILE:LINE", innermost first, then "\x1e" "frame-end"), which
 * the master turns into the slowlog entry. Every read goes through peek, so that it is
 * safe from another thread while the script runs, and no allocation is made: it also runs
 * in a signal handler. */
static void dump_stack(int signo)
{
	(void) signo;
	int saved = errno;
	static struct out o;
	o.len = 0;
	const struct drover_request *running = NULL;
	zend_execute_data *at = NULL;
	peek(&current, &running, sizeof(running));
	if (running) {
		peek(&EG(current_execute_data), &at, sizeof(at));
	}
	for (int depth = 0; at && depth < 200; depth++) {
		zend_execute_data ex;
		zend_function fn;
		if (peek(at, &ex, sizeof(ex)) != 0) {
			break;
		}
		if (ex.func && peek(ex.func, &fn, sizeof(fn)) == 0) {
			put_str(&o, "\x1e" "frame ");
			if (fn.common.function_name) {
				zend_string *scope_name = NULL;
				if (fn.common.scope &&
				    peek((const char *) fn.common.scope + offsetof(zend_class_entry, name),
					 &scope_name, sizeof(scope_name)) == 0 && scope_name) {
					put_zstr(&o, scope_name);
					put_str(&o, "::");
				}
				put_zstr(&o, fn.common.function_name);
			} else {
				put_str(&o, "{main}");
			}
			put_str(&o, "() ");
			put_where(&o, at);
			put_str(&o, "\n");
		}
		at = ex.prev_execute_data;
	}
	put_str(&o, "\x1e" "frame-end\n");
	size_t off = 0;
	while (off < o.len) {
		ssize_t n = write(2, o.buf + off, o.len - off);
		if (n <= 0) {
			break;
		}
		off += (size_t) n;
	}
	errno = saved;
}

/* The slowlog's SIGUSR2 is taken by this thread, never by the one running the script: a
 * handler on the script's thread would cut its sleep() (or poll(), or any wait) short, and
 * the request would go on early. The thread blocks every signal and waits for SIGUSR2
 * alone; it only reads memory (through peek) and writes to stderr. */
static void *stack_thread(void *unused)
{
	(void) unused;
	sigset_t usr2;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	for (;;) {
		int signo;
		if (sigwait(&usr2, &signo) == 0) {
			dump_stack(signo);
		}
	}
	return NULL;
}

/* In each worker, before its first request: SIGUSR2 blocked in the worker's own thread and
 * taken by stack_thread. Returns 0, or -1 when the thread could not start (SIGUSR2 then
 * stays with the handler installed at startup, which interrupts waits). */
int drover_php_start_stack_thread(void)
{
	sigset_t all, usr2, before;
	sigfillset(&all);
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	/* The new thread inherits "all": no process signal is ever delivered to it. */
	pthread_sigmask(SIG_SETMASK, &all, &before);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t thread;
	int failed = pthread_create(&thread, &attr, stack_thread, NULL);
	pthread_attr_destroy(&attr);
	if (!failed) {
		sigaddset(&before, SIGUSR2);
	}
	pthread_sigmask(SIG_SETMASK, &before, NULL);
	return failed ? -1 : 0;
}

/* How long a worker that wrote its stack for a kill waits for the master's SIGKILL before
 * it ends itself (the master gone): the master kills it within a fraction of a second. */
#define KILL_WAIT_SECONDS 5

/* The stack for a request_terminate_timeout kill (SIGUSR1): written as dump_stack writes
 * it, then the worker waits for its SIGKILL with every signal blocked. The script must not
 * go on: the signal cut its sleep() (or poll(), or any wait a handler interrupts) short,
 * and what it went on to send would reach the client as a response. */
static void dump_stack_for_kill(int signo)
{
	dump_stack(signo);
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	struct timespec left = { KILL_WAIT_SECONDS, 0 };
	while (nanosleep(&left, &left) != 0 && errno == EINTR) {
	}
	kill(getpid(), SIGKILL);
}

/* Installed in the zygote before PHP starts, so that PHP's signal layer (zend_signal)
 * records them as the handlers to call, deferred out of its critical sections. */
void drover_php_install_stack_dump(void)
{
	struct sigaction action;
	memset(&action, 0, sizeof(action));
	action.sa_handler = dump_stack;
	action.sa_flags = SA_RESTART;
	sigemptyset(&action.sa_mask);
	sigaction(SIGUSR2, &action, NULL);
	action.sa_handler = dump_stack_for_kill;
	sigaction(SIGUSR1, &action, NULL);
}

/* ------------------------------------------------- php-fpm's cgi.* and fastcgi.* settings */

#include <ext/standard/info.h>

/* The entries php-fpm's own module ("cgi-fcgi") registers, with its defaults and its
 * modes, so that php.ini, [php.ini] and [php.admin_ini] may set them and ini_get() reads
 * them as under php-fpm. drover honours cgi.fix_pathinfo and cgi.discard_path (the Rust
 * side reads them once per worker: crates/php/src/script.rs decides the script with them)
 * and fastcgi.logging; the others are accepted and read back, and change nothing (see the
 * README's PHP runtime section). */
struct drover_cgi_settings {
	zend_bool rfc2616_headers;
	zend_bool nph;
	zend_bool force_redirect;
	char *redirect_status_env;
	zend_bool fix_pathinfo;
	zend_bool discard_path;
	zend_bool fcgi_logging;
	char *error_header;
	char *fpm_config;
};

static struct drover_cgi_settings cgi_settings = {
	0, 0, 1, NULL, 1, 0, 1, NULL, NULL
};

PHP_INI_BEGIN()
	STD_PHP_INI_BOOLEAN("cgi.rfc2616_headers", "0", PHP_INI_ALL, OnUpdateBool,
			    rfc2616_headers, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_BOOLEAN("cgi.nph", "0", PHP_INI_ALL, OnUpdateBool,
			    nph, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_BOOLEAN("cgi.force_redirect", "1", PHP_INI_SYSTEM, OnUpdateBool,
			    force_redirect, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_ENTRY("cgi.redirect_status_env", NULL, PHP_INI_SYSTEM, OnUpdateString,
			  redirect_status_env, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_BOOLEAN("cgi.fix_pathinfo", "1", PHP_INI_SYSTEM, OnUpdateBool,
			    fix_pathinfo, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_BOOLEAN("cgi.discard_path", "0", PHP_INI_SYSTEM, OnUpdateBool,
			    discard_path, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_BOOLEAN("fastcgi.logging", "1", PHP_INI_SYSTEM, OnUpdateBool,
			    fcgi_logging, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_ENTRY("fastcgi.error_header", NULL, PHP_INI_SYSTEM, OnUpdateString,
			  error_header, struct drover_cgi_settings, cgi_settings)
	STD_PHP_INI_ENTRY("fpm.config", NULL, PHP_INI_SYSTEM, OnUpdateString,
			  fpm_config, struct drover_cgi_settings, cgi_settings)
PHP_INI_END()

static PHP_MINIT_FUNCTION(drover_cgi)
{
	REGISTER_INI_ENTRIES();
	return SUCCESS;
}

static PHP_MSHUTDOWN_FUNCTION(drover_cgi)
{
	UNREGISTER_INI_ENTRIES();
	return SUCCESS;
}

static PHP_MINFO_FUNCTION(drover_cgi)
{
	php_info_print_table_start();
	php_info_print_table_row(2, "php-fpm", "active (drover)");
	php_info_print_table_end();
	DISPLAY_INI_ENTRIES();
}

/* Named as php-fpm's, so that extension_loaded('cgi-fcgi') answers as under php-fpm. */
static zend_module_entry drover_cgi_module = {
	STANDARD_MODULE_HEADER,
	"cgi-fcgi",
	NULL,
	PHP_MINIT(drover_cgi),
	PHP_MSHUTDOWN(drover_cgi),
	NULL,
	NULL,
	PHP_MINFO(drover_cgi),
	PHP_VERSION,
	STANDARD_MODULE_PROPERTIES
};

/* What the Rust side decides the script with, as the worker's settings are (php.ini,
 * [php.ini], then [php.admin_ini]). */
struct drover_path_settings {
	int fix_pathinfo;
	int discard_path;
	int fcgi_logging;
	/* php.ini's doc_root (NULL: unset; Debian's php.ini sets it empty): DOCUMENT_ROOT
	 * when the web server sends none. */
	const char *doc_root;
};

void drover_php_path_settings(struct drover_path_settings *out)
{
	out->fix_pathinfo = cgi_settings.fix_pathinfo;
	out->discard_path = cgi_settings.discard_path;
	out->fcgi_logging = cgi_settings.fcgi_logging;
	out->doc_root = PG(doc_root);
}
