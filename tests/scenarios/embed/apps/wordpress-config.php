<?php
/* drover's scenario tests and benches/compare.py: the database comes from the request's
 * FastCGI params (DROVER_WP_DB, DROVER_WP_DB_SOCKET), so that each run has its own. */
define('DB_NAME', $_SERVER['DROVER_WP_DB']);
define('DB_USER', 'app');
define('DB_PASSWORD', 'app');
define('DB_HOST', 'localhost:' . $_SERVER['DROVER_WP_DB_SOCKET']);
define('WP_HOME', 'http://localhost');
define('WP_SITEURL', 'http://localhost');
foreach (['AUTH_KEY', 'SECURE_AUTH_KEY', 'LOGGED_IN_KEY', 'NONCE_KEY', 'AUTH_SALT',
          'SECURE_AUTH_SALT', 'LOGGED_IN_SALT', 'NONCE_SALT'] as $key) {
    define($key, 'drover-test ' . $key);
}
