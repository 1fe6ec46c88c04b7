<?php
// What Composer's vendor/autoload.php does for an app: the framework (Debian's autoloader,
// found on PHP's include_path, /usr/share/php) and the app's own App\ classes (PSR-4).

require_once 'Illuminate/autoload.php';
require_once 'Illuminate/Foundation/helpers.php';

spl_autoload_register(function ($class) {
    if (strncmp($class, 'App\\', 4) !== 0) {
        return;
    }
    $file = __DIR__.'/../app/'.str_replace('\\', '/', substr($class, 4)).'.php';
    if (is_file($file)) {
        require $file;
    }
});
