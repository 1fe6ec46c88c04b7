use super::*;

fn peer(trusted: &Trusted) -> Peer<'_> {
    Peer {
        remote: Some("10.0.0.7:5555".parse().unwrap()),
        local: Some("127.0.0.1:8000".parse().unwrap()),
        trusted,
        max_body: Some(1000),
    }
}

fn local() -> Trusted {
    Trusted::Ips(vec!["127.0.0.1".parse().unwrap()])
}

fn parsed(text: &str) -> Result<Option<Head>, Refusal> {
    parse(text.as_bytes(), &peer(&local()))
}

fn status(text: &str) -> u16 {
    parsed(text).unwrap_err().status
}

fn param(head: &Head, name: &str) -> String {
    String::from_utf8_lossy(head.params.get(name).unwrap_or(b"<absent>")).into_owned()
}

#[test]
fn a_get_becomes_the_cgi_variables_nginx_would_send() {
    let head = parsed(
        "GET /app/a%20b?x=1&y=2 HTTP/1.1\r\nHost: example.org:8080\r\nUser-Agent: t\r\n\
         Accept: a\r\nAccept: b\r\nCookie: a=1\r\nCookie: b=2\r\nX_Forwarded_For: 1.2.3.4\r\n\r\nrest",
    )
    .unwrap()
    .unwrap();
    assert_eq!(head.len, "GET /app/a%20b?x=1&y=2 HTTP/1.1\r\nHost: example.org:8080\r\nUser-Agent: t\r\nAccept: a\r\nAccept: b\r\nCookie: a=1\r\nCookie: b=2\r\nX_Forwarded_For: 1.2.3.4\r\n\r\n".len());
    assert_eq!(param(&head, "REQUEST_METHOD"), "GET");
    assert_eq!(param(&head, "REQUEST_URI"), "/app/a%20b?x=1&y=2");
    assert_eq!(param(&head, "DOCUMENT_URI"), "/app/a b");
    assert_eq!(param(&head, "QUERY_STRING"), "x=1&y=2");
    assert_eq!(param(&head, "SERVER_PROTOCOL"), "HTTP/1.1");
    assert_eq!(param(&head, "SERVER_NAME"), "example.org");
    assert_eq!(param(&head, "SERVER_PORT"), "8080");
    assert_eq!(param(&head, "REMOTE_ADDR"), "10.0.0.7");
    assert_eq!(param(&head, "REMOTE_PORT"), "5555");
    assert_eq!(param(&head, "HTTP_ACCEPT"), "a, b");
    assert_eq!(param(&head, "HTTP_COOKIE"), "a=1; b=2");
    assert_eq!(param(&head, "HTTP_USER_AGENT"), "t");
    // A name with an underscore could pose as another header: dropped.
    assert_eq!(param(&head, "HTTP_X_FORWARDED_FOR"), "<absent>");
    assert_eq!(param(&head, "CONTENT_LENGTH"), "<absent>");
    assert!(head.keep_alive);
    assert_eq!(head.framing, Framing::Length(0));
}

#[test]
fn an_incomplete_head_asks_for_more() {
    assert!(parsed("GET / HTTP/1.1\r\nHost: a\r\n").unwrap().is_none());
    assert!(parsed("GE").unwrap().is_none());
}

#[test]
fn smuggling_corners_are_refused() {
    let both =
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(status(both), 400);
    let differing = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
    assert_eq!(status(differing), 400);
    let listed = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 4\r\n\r\n";
    assert_eq!(status(listed), 400);
    let signed = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n";
    assert_eq!(status(signed), 400);
    let folded = "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n  continued\r\n\r\n";
    assert_eq!(status(folded), 400);
    let te10 = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(status(te10), 400);
    let gzip = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    assert_eq!(status(gzip), 501);
    assert_eq!(status("GET / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    assert_eq!(status("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status("GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    // The same length twice is refused too, as nginx refuses it (RFC 9110 §8.6 allows
    // either).
    let same = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n";
    assert_eq!(status(same), 400);
    let listed_same = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n";
    assert_eq!(status(listed_same), 400);
}

#[test]
fn limits_answer_414_431_and_413() {
    let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_REQUEST_LINE));
    assert_eq!(status(&long), 414);
    let big = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n",
        "b".repeat(MAX_HEAD)
    );
    assert_eq!(status(&big), 431);
    let mut many = "GET / HTTP/1.1\r\nHost: a\r\n".to_string();
    for i in 0..MAX_HEADERS {
        many.push_str(&format!("X-{i}: v\r\n"));
    }
    many.push_str("\r\n");
    assert_eq!(status(&many), 431);
    let large = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n";
    assert_eq!(status(large), 413);
}

#[test]
fn connection_and_expect_tokens() {
    let close = parsed("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!close.keep_alive);
    let old = parsed("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(!old.keep_alive);
    let kept = parsed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(kept.keep_alive);
    let expect =
        parsed("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            .unwrap()
            .unwrap();
    assert!(expect.expect_continue);
    assert_eq!(param(&expect, "CONTENT_LENGTH"), "5");
}

#[test]
fn forwarded_headers_count_only_from_a_trusted_peer() {
    let text = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 203.0.113.9, 10.0.0.7\r\n\
                X-Forwarded-Proto: https\r\n\r\n";
    let untrusted = parse(text.as_bytes(), &peer(&local())).unwrap().unwrap();
    assert_eq!(param(&untrusted, "REMOTE_ADDR"), "10.0.0.7");
    assert_eq!(param(&untrusted, "HTTPS"), "<absent>");
    let proxy = Trusted::Ips(vec!["10.0.0.7".parse().unwrap()]);
    let trusted = parse(text.as_bytes(), &peer(&proxy)).unwrap().unwrap();
    // The rightmost hop the trusted proxies did not add themselves.
    assert_eq!(param(&trusted, "REMOTE_ADDR"), "203.0.113.9");
    assert_eq!(param(&trusted, "REMOTE_PORT"), "<absent>");
    assert_eq!(param(&trusted, "HTTPS"), "on");
    assert_eq!(param(&trusted, "SERVER_PORT"), "443");
    let any = parse(text.as_bytes(), &peer(&Trusted::Any))
        .unwrap()
        .unwrap();
    assert_eq!(param(&any, "REMOTE_ADDR"), "203.0.113.9");
}

#[test]
fn an_absolute_form_target_is_served_as_its_path_on_its_authority() {
    let head = parsed("GET http://example.org:8080/a%2Fb?q=1 HTTP/1.1\r\nHost: other\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(param(&head, "REQUEST_URI"), "/a%2Fb?q=1");
    assert_eq!(param(&head, "DOCUMENT_URI"), "/a/b");
    assert_eq!(param(&head, "QUERY_STRING"), "q=1");
    assert_eq!(param(&head, "SERVER_NAME"), "example.org");
    assert_eq!(param(&head, "SERVER_PORT"), "8080");
    let bare = parsed("GET HTTP://example.org?x HTTP/1.1\r\nHost: e\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(param(&bare, "DOCUMENT_URI"), "/");
    assert_eq!(param(&bare, "QUERY_STRING"), "x");
}
