//! A small WebDriver client for the web view's browser tests and
//! benchmarks: starts Debian's `chromedriver` on a free loopback port,
//! opens one headless Chromium session, and offers what the tests need
//! (navigate, run a script, wait for a script to return true, take a
//! screenshot). HTTP/1.1 over a plain `TcpStream`: no client library.
//!
//! Chromium and its driver are installed by `scripts/install-test-deps`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

/// Where Debian installs them.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A chromedriver process and one browser session, both ended on drop.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    /// The browser's profile, removed on drop.
    _profile: tempfile::TempDir,
}

/// A WebDriver error: the HTTP status and the driver's message.
#[derive(Debug)]
pub struct WebDriverError(pub String);

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One HTTP/1.1 request to the driver; the JSON body of the answer.
fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, WebDriverError> {
    let error = |e: std::io::Error| WebDriverError(format!("{method} {path}: {e}"));
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(error)?;
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        payload.len()
    );
    stream.write_all(head.as_bytes()).map_err(error)?;
    stream.write_all(payload.as_bytes()).map_err(error)?;
    // chromedriver keeps the connection open: read the header, then
    // Content-Length bytes (or chunks up to the last one).
    let mut raw = Vec::new();
    let mut buffer = [0u8; 65536];
    let split = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut buffer).map_err(error)?;
        if n == 0 {
            return Err(WebDriverError(format!("{method} {path}: no HTTP header")));
        }
        raw.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let length = head.lines().find_map(|l| {
        l.strip_prefix("content-length:")
            .and_then(|v| v.trim().parse::<usize>().ok())
    });
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let body = &raw[split + 4..];
        let complete = match length {
            Some(length) => body.len() >= length,
            None if chunked => body.windows(5).any(|w| w == b"0\r\n\r\n"),
            None => false,
        };
        if complete {
            break;
        }
        let n = stream.read(&mut buffer).map_err(error)?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buffer[..n]);
    }
    let mut body = raw[split + 4..].to_vec();
    if chunked {
        body = dechunk(&body);
    }
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if status != 200 {
        return Err(WebDriverError(format!(
            "{method} {path}: {status}: {}",
            value["value"]["message"]
                .as_str()
                .unwrap_or(&String::from_utf8_lossy(&body))
        )));
    }
    Ok(value["value"].clone())
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&body[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = end + 2;
        out.extend_from_slice(&body[start..(start + size).min(body.len())]);
        body = &body[(start + size + 2).min(body.len())..];
    }
    out
}

impl Browser {
    /// Starts chromedriver and a headless Chromium of `width`×`height`.
    /// Panics with what to run when they are not installed.
    pub fn start(width: u32, height: u32) -> Self {
        assert!(
            Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists(),
            "{CHROMEDRIVER} and {CHROMIUM} are needed: run scripts/install-test-deps"
        );
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(30);
        while request(port, "GET", "/status", None).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::Builder::new()
            .prefix("ksim-chromium-")
            .tempdir()
            .expect("a profile directory");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", "--enable-precise-memory-info",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        }}});
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        let session = request(port, "POST", "/session", Some(&capabilities))
            .expect("cannot start a Chromium session");
        browser.session = session["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        browser
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, WebDriverError> {
        request(
            self.port,
            method,
            &format!("/session/{}{path}", self.session),
            body,
        )
    }

    /// Loads `url`.
    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(&json!({"url": url})))
            .expect("navigation");
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the
    /// page and returns its result.
    pub fn execute(&self, script: &str, args: &[Value]) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": args})),
        )
        .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Runs `script` (a function body whose last argument is the callback
    /// to call with the result) and returns what it passed to the callback.
    pub fn execute_async(&self, script: &str, args: &[Value]) -> Value {
        self.call(
            "POST",
            "/execute/async",
            Some(&json!({"script": script, "args": args})),
        )
        .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Evaluates `expression` until it is truthy and returns its value;
    /// panics with `what` and the last value after `timeout`.
    #[track_caller]
    pub fn wait_for(&self, what: &str, timeout: Duration, expression: &str) -> Value {
        let deadline = Instant::now() + timeout;
        let script = format!("return ({expression});");
        loop {
            let value = self.execute(&script, &[]);
            let truthy = match &value {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {expression} was {value}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A PNG of the viewport, written to `path` (its directory created).
    pub fn screenshot(&self, path: &Path) -> PathBuf {
        let data = self.call("GET", "/screenshot", None).expect("a screenshot");
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshot directory");
        }
        std::fs::write(path, png).expect("cannot write the screenshot");
        path.to_path_buf()
    }

    /// Resizes the window.
    pub fn resize(&self, width: u32, height: u32) {
        self.call(
            "POST",
            "/window/rect",
            Some(&json!({"width": width, "height": height})),
        )
        .expect("resize");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", "", None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
