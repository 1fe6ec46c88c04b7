<?php
// The extensions a PHP site commonly loads: each is exercised when loaded, and named as
// absent otherwise (the same on both sides of the comparison).
date_default_timezone_set('UTC');
$text = str_repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 40);

echo 'pcre ', preg_match_all('/\b(\w)(\w*)\b/u', $text, $m), ' ', preg_replace_callback('/(\w+) (\w+)/', fn ($m) => "$m[2] $m[1]", 'one two three four'), "\n";
echo 'json ', json_encode(['a' => 1.5, 'b' => [true, null], 'c' => "é\"/"], JSON_UNESCAPED_UNICODE), ' ', json_decode('{"x":{"y":[1,2,3]}}', true)['x']['y'][2], "\n";
echo 'hash ', hash('sha256', $text), ' ', hash('crc32b', $text), ' ', md5($text), ' ', sha1($text), "\n";
echo 'hmac ', hash_hmac('sha512', $text, 'key'), "\n";
echo 'base64 ', base64_encode(substr($text, 0, 40)), ' ', bin2hex(str_repeat("\x01", 3)), ' ', crc32($text), "\n";
echo 'date ', date('Y-m-d H:i:s D N', 1700000000), ' ', (new DateTimeImmutable('2024-02-29 12:00', new DateTimeZone('UTC')))->modify('+1 year')->format(DATE_ATOM), "\n";
echo 'interval ', (new DateTime('2020-01-01'))->diff(new DateTime('2026-12-07'))->format('%y %m %d %a'), "\n";
echo 'spl ', implode(',', iterator_to_array(new LimitIterator(new ArrayIterator(range(1, 20)), 5, 3), false)), ' ';
$heap = new SplMinHeap(); foreach ([5, 3, 9, 1] as $v) { $heap->insert($v); } echo $heap->extract(), ' ';
$q = new SplPriorityQueue(); $q->insert('lo', 1); $q->insert('hi', 9); echo $q->extract(), "\n";
echo 'ctype ', extension_loaded('ctype') ? var_export([ctype_digit('123'), ctype_alpha('ab1')], true) : 'absent', "\n";
echo 'mbstring ', extension_loaded('mbstring') ? mb_strtoupper('größe') . ' ' . mb_strlen('日本語') . ' ' . mb_substr('héllo', 1, 3) : 'absent', "\n";
echo 'iconv ', extension_loaded('iconv') ? iconv('UTF-8', 'ISO-8859-1//TRANSLIT', 'café') === "caf\xe9" ? 'ok' : 'differs' : 'absent', "\n";
if (extension_loaded('dom')) {
    $doc = new DOMDocument();
    $doc->loadXML('<root><item id="1">one</item><item id="2">two</item></root>');
    $xpath = new DOMXPath($doc);
    echo 'dom ', $xpath->query('//item[@id="2"]')->item(0)->textContent, ' ', $doc->getElementsByTagName('item')->length, "\n";
    echo 'dom-save ', trim($doc->saveXML()), "\n";
} else {
    echo "dom absent\n";
}
echo 'simplexml ', extension_loaded('simplexml') ? (string) simplexml_load_string('<a><b>c</b></a>')->b : 'absent', "\n";
echo 'xml ', extension_loaded('xml') ? (xml_parse(xml_parser_create(), '<x/>', true) ? 'parsed' : 'failed') : 'absent', "\n";
echo 'filter ', extension_loaded('filter') ? var_export(filter_var('a@example.org', FILTER_VALIDATE_EMAIL), true) . ' ' . var_export(filter_var('300', FILTER_VALIDATE_INT, ['options' => ['max_range' => 255]]), true) : 'absent', "\n";
echo 'zlib ', extension_loaded('zlib') ? strlen(gzcompress($text, 9)) . ' ' . (gzuncompress(gzcompress($text)) === $text ? 'round-trip' : 'differs') : 'absent', "\n";
echo 'intl ', extension_loaded('intl') ? (new NumberFormatter('en_US', NumberFormatter::DECIMAL))->format(1234567.891) : 'absent', "\n";
echo 'tokenizer ', extension_loaded('tokenizer') ? count(token_get_all('<?php echo 1 + 2;')) : 'absent', "\n";
if (extension_loaded('pdo_sqlite')) {
    $db = new PDO('sqlite::memory:');
    $db->exec('CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)');
    $insert = $db->prepare('INSERT INTO t (name) VALUES (?)');
    foreach (['b', 'a', 'c'] as $name) { $insert->execute([$name]); }
    echo 'pdo_sqlite ', implode(',', $db->query('SELECT name FROM t ORDER BY name DESC')->fetchAll(PDO::FETCH_COLUMN)), "\n";
} else {
    echo "pdo_sqlite absent\n";
}
echo 'session ', extension_loaded('session') ? session_status() : 'absent', "\n";
echo 'apcu ', function_exists('apcu_enabled') ? var_export(apcu_enabled(), true) : 'absent', "\n";
echo 'headers ', http_response_code(), ' ', headers_sent() ? 'sent' : 'not sent', "\n";
