//! FastCGI (stub: the fastcgi helper owns this folder)
