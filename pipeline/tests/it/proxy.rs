//! A fault-injecting HTTP/1.1 proxy on loopback, in front of the S3 test server.
//!
//! Each request is read whole, then, by a seeded draw: answered `503 SlowDown`,
//! answered by closing the connection, forwarded with its response body cut short,
//! forwarded with its body trickled slowly, or forwarded intact. It records every request line so tests can see what was sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Shares of requests that get each fault (the rest pass).
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub slow_down: f64,
    pub drop: f64,
    pub cut_body: f64,
    /// Responses whose body trickles: 50 pieces (at least 8 KiB each) 20 ms apart.
    pub slow_body: f64,
}

#[derive(Default)]
pub struct Counts {
    pub requests: AtomicU64,
    pub slow_down: AtomicU64,
    pub dropped: AtomicU64,
    pub cut: AtomicU64,
    pub slowed: AtomicU64,
    pub lines: Mutex<Vec<String>>,
}

pub struct Proxy {
    pub port: u16,
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl Proxy {
    pub fn start(upstream: u16, faults: Faults, seed: u64) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let rng = Arc::new(Mutex::new(fastrand::Rng::with_seed(seed)));
        let (c, s) = (counts.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (c, rng) = (c.clone(), rng.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream, faults, &c, &rng);
                });
            }
        });
        Proxy { port, counts, stop }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn injected(&self) -> (u64, u64, u64) {
        (
            self.counts.slow_down.load(Ordering::SeqCst),
            self.counts.dropped.load(Ordering::SeqCst),
            self.counts.cut.load(Ordering::SeqCst),
        )
    }
}

struct Message {
    head: Vec<u8>,
    body: Vec<u8>,
    first_line: String,
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Reads one HTTP message; `no_body` for responses to HEAD and 204/304.
fn read_message(
    r: &mut BufReader<TcpStream>,
    is_response_to_head: bool,
) -> std::io::Result<Option<Message>> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        if r.read_until(b'\n', &mut line)? == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&line);
        if line == b"\r\n" || line == b"\n" {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let first_line = text.lines().next().unwrap_or("").to_string();
    let status: u16 = first_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut body = Vec::new();
    let bodiless =
        is_response_to_head || status == 204 || status == 304 || (100..200).contains(&status);
    if bodiless {
    } else if header(&text, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size_line = Vec::new();
            r.read_until(b'\n', &mut size_line)?;
            body.extend_from_slice(&size_line);
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&size_line)
                    .trim()
                    .split(';')
                    .next()
                    .unwrap_or("0"),
                16,
            )
            .unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
            if size == 0 {
                break;
            }
        }
    } else if let Some(len) = header(&text, "content-length").and_then(|v| v.parse::<usize>().ok())
    {
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    }
    Ok(Some(Message {
        head,
        body,
        first_line,
    }))
}

fn serve(
    client: TcpStream,
    upstream: u16,
    faults: Faults,
    counts: &Counts,
    rng: &Mutex<fastrand::Rng>,
) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    let mut up: Option<(TcpStream, BufReader<TcpStream>)> = None;
    while let Some(req) = read_message(&mut reader, false)? {
        counts.requests.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut lines) = counts.lines.lock() {
            lines.push(req.first_line.clone());
        }
        let draw = rng.lock().map(|mut r| r.f64()).unwrap_or(1.0);
        if draw < faults.slow_down {
            counts.slow_down.fetch_add(1, Ordering::SeqCst);
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
            write!(
                client,
                "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )?;
            continue;
        }
        if draw < faults.slow_down + faults.drop {
            counts.dropped.fetch_add(1, Ordering::SeqCst);
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        if up.is_none() {
            let s = TcpStream::connect(("127.0.0.1", upstream))?;
            let r = BufReader::new(s.try_clone()?);
            up = Some((s, r));
        }
        let Some((up_w, up_r)) = up.as_mut() else {
            return Ok(());
        };
        up_w.write_all(&req.head)?;
        up_w.write_all(&req.body)?;
        let is_head = req.first_line.starts_with("HEAD ");
        let Some(resp) = read_message(up_r, is_head)? else {
            return Ok(());
        };
        let cut = draw < faults.slow_down + faults.drop + faults.cut_body
            && req.first_line.starts_with("GET ")
            && resp.body.len() > 1024
            && resp.first_line.contains(" 20");
        client.write_all(&resp.head)?;
        if cut {
            counts.cut.fetch_add(1, Ordering::SeqCst);
            client.write_all(&resp.body[..resp.body.len() / 2])?;
            client.flush()?;
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        let slow = !cut
            && draw >= faults.slow_down + faults.drop + faults.cut_body
            && draw < faults.slow_down + faults.drop + faults.cut_body + faults.slow_body;
        if slow {
            counts.slowed.fetch_add(1, Ordering::SeqCst);
            for piece in resp.body.chunks((resp.body.len() / 50).max(8 << 10)) {
                client.write_all(piece)?;
                client.flush()?;
                std::thread::sleep(Duration::from_millis(20));
            }
        } else {
            client.write_all(&resp.body)?;
        }
        client.flush()?;
    }
    Ok(())
}
