#!/bin/sh
# Build PHP's embed SAPI as Debian builds libphp8.2.so (libphp8.2-embed: the same configure
# options, built-in extensions and compiler flags), linked three times: as Debian links it
# (plain/), with -Wl,-Bsymbolic (symbolic/), which binds libphp's calls to its own functions
# and its loads of its own globals directly instead of through the PLT and the GOT, and with
# -Wl,-Bsymbolic-functions (functions/), which binds the calls only (BENCHMARKS.md,
# 2026-12-02, "A libphp linked with -Bsymbolic"). The extensions benches' Symfony page uses
# are built in, since Debian's 8.2.36 modules need symbols that the 8.2.32 source (the
# newest the archive had) lacks; the other Debian modules load from conf.d.
#
#     scripts/build-libphp.sh SOURCE OUT
#
# SOURCE: PHP 8.2's Debian source tree (`apt-get source php8.2`, which needs a deb-src
# entry), with its patches applied. OUT gets plain/, symbolic/ and functions/, each with
# libphp8.2.so, libphp.so (the name drover-php's NEEDED gives) and conf.d/. A pool uses one
# with
#
#     [env]
#     LD_LIBRARY_PATH = "OUT/symbolic"
#     PHP_INI_SCAN_DIR = "OUT/symbolic/conf.d"
#
# Needs Debian's build dependencies for these extensions: libssl-dev libargon2-dev
# libpcre2-dev libxml2-dev libsodium-dev zlib1g-dev libmhash-dev systemtap-sdt-dev, and
# dpkg-dev. About 6 minutes on 2 cores. drover-php must be built against the same headers
# (`make install-headers INSTALL_ROOT=DIR` in SOURCE, and a PHP_CONFIG whose --includes
# names DIR's): Debian's 8.2.36 headers make it use symbols 8.2.32 lacks.
set -eu
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
cd "$src"

# debian/rules: hardening=+all, -O2, its DEB_CFLAGS_MAINT_APPEND and DEB_LDFLAGS_MAINT_APPEND.
export DEB_BUILD_MAINT_OPTIONS="hardening=+all optimize=-lto"
export DEB_CFLAGS_MAINT_APPEND="-O2 -Wall -pedantic -fsigned-char -fno-strict-aliasing -DOPENSSL_SUPPRESS_DEPRECATED -g"
export DEB_LDFLAGS_MAINT_APPEND="-Wl,--as-needed"
CFLAGS=$(dpkg-buildflags --get CFLAGS)
CPPFLAGS=$(dpkg-buildflags --get CPPFLAGS)
LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
export CFLAGS CPPFLAGS LDFLAGS

if [ ! -f Makefile ]; then
	# debian/rules' embed_config with COMMON_CONFIG, less the CLI; no valgrind support
	# (Debian's build has no valgrind headers).
	./buildconf --force
	./configure --prefix=/usr --enable-embed=shared --disable-cli --disable-cgi --disable-phpdbg \
		--with-config-file-path=/etc/php/8.2/embed \
		--with-config-file-scan-dir=/etc/php/8.2/embed/conf.d \
		'--libdir=${prefix}/lib/php' '--libexecdir=${prefix}/lib/php' \
		'--datadir=${prefix}/share/php/8.2' --program-suffix=8.2 \
		--sysconfdir=/etc --localstatedir=/var --mandir=/usr/share/man \
		--disable-all --disable-debug --disable-rpath --disable-static --with-pic \
		--with-layout=GNU --without-pear --enable-filter --with-openssl \
		--with-password-argon2=/usr --with-external-pcre --with-mhash=/usr --with-libxml \
		--enable-session --with-sodium --with-system-tzdata --with-zlib=/usr \
		--with-zlib-dir=/usr --enable-dtrace --without-mm --enable-pcntl --without-valgrind \
		--enable-ctype --enable-tokenizer --with-iconv --enable-dom --enable-xml \
		--enable-simplexml --enable-xmlreader --enable-xmlwriter --enable-mbstring \
		--disable-mbregex --enable-opcache --enable-posix
fi

# The objects are the same for both: only the link differs.
for variant in plain symbolic functions; do
	case $variant in
	plain) flags=$LDFLAGS ;;
	symbolic) flags="$LDFLAGS -Wl,-Bsymbolic" ;;
	functions) flags="$LDFLAGS -Wl,-Bsymbolic-functions" ;;
	esac
	rm -f libphp.la libs/libphp.so
	nice -n 10 make -j2 LDFLAGS="$flags" libphp.la
	mkdir -p "$out/$variant"
	# Stripped as dh_strip strips Debian's.
	strip --remove-section=.comment --remove-section=.note --strip-unneeded \
		-o "$out/$variant/libphp8.2.so" libs/libphp.so
	ln -sf libphp8.2.so "$out/$variant/libphp.so"
	# PHP_INI_SCAN_DIR for this libphp: Debian's embed conf.d, less the extensions built in
	# above and those whose Debian module needs symbols this source does not have, with
	# this build's OPcache.
	rm -rf "$out/$variant/conf.d"
	cp -r /etc/php/8.2/embed/conf.d "$out/$variant/conf.d"
	for ext in opcache mysqlnd xml ctype curl dom exif fileinfo iconv intl mbstring mysqli \
		pdo_mysql phar posix readline shmop simplexml sockets tokenizer xmlreader xmlwriter xsl; do
		rm -f "$out/$variant"/conf.d/[0-9][0-9]-"$ext".ini
	done
	cp modules/opcache.so "$out/opcache.so"
	echo "zend_extension=$out/opcache.so" >"$out/$variant/conf.d/10-opcache.ini"
done
echo "built $out/plain, $out/symbolic and $out/functions"
