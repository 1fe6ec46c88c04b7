//! Installing and running drover as servers are: the Debian packages `scripts/package.sh`
//! builds (`deb`), and drover as a container's PID 1 or as the child subreaper of an app's
//! orphans (`pid1`). Both need root (dpkg, apt-get, unshare), which CI has. And as Python
//! users install servers: the wheel, with pip, into a virtualenv (`wheel`; no root).

mod deb;
mod pid1;
mod wheel;
