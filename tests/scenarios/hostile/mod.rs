//! What careless or hostile clients, broken apps, hurried operators and odd files do to a
//! running drover: each test sends it, then checks what a user would (the answer and its
//! time, no process left untracked, the running configuration equal to the files).

mod body;
mod descriptors;
mod fastcgi;
mod files;
mod lifecycle;
mod orphaned;
mod parents;
mod reload;
mod signals;
mod slowloris;
mod slowloris_php;
mod zygote;
