//! A Prometheus endpoint: answers any HTTP request on a TCP address with the text exposition
//! format that `render` produces at that moment.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Produces the metrics text (Prometheus text format 0.0.4).
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Connections answered at once; more wait in the listen backlog.
pub const MAX_CLIENTS: usize = 64;
/// A client gets this long to send its request and to take the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed accept (out of file descriptors), the loop waits this long: the listener
/// stays readable, and retrying at once would take a whole core.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Binds `addr` and serves `GET /metrics` (any path) until the task is dropped. At most
/// [`MAX_CLIENTS`] connections at once, each for at most 5 s to ask and 5 s to take the answer.
pub async fn serve(
    addr: SocketAddr,
    render: Render,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("metrics endpoint {addr}: {e}")))?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
    Ok(tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let Ok((mut s, _)) = listener.accept().await else {
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            };
            let render = render.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let mut req = [0u8; 2048];
                let read = tokio::time::timeout(CLIENT_TIMEOUT, s.read(&mut req));
                if !matches!(read.await, Ok(Ok(n)) if n > 0) {
                    return;
                }
                let body = render();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let write = async {
                    s.write_all(head.as_bytes()).await?;
                    s.write_all(body.as_bytes()).await?;
                    s.shutdown().await
                };
                let _ = tokio::time::timeout(CLIENT_TIMEOUT, write).await;
            });
        }
    }))
}

/// Escapes a label value (`\`, `"` and newlines).
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint rendering `braid_x 1` on a free port (bound, then released for it).
    async fn endpoint() -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let task = serve(addr, Arc::new(|| "braid_x 1\n".to_string()))
            .await
            .unwrap();
        (addr, task)
    }

    #[tokio::test]
    async fn answers_with_the_rendered_text() {
        let (addr, task) = endpoint().await;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.ends_with("\r\n\r\nbraid_x 1\n"), "{out}");
        task.abort();
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    fn open_fds() -> usize {
        std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
    }

    /// Clients that connect and send nothing hold at most MAX_CLIENTS of the server's
    /// descriptors (before, one each for 5 s: enough of them ran the process out of
    /// descriptors, and the accept loop then spun on the error); the others wait in the
    /// backlog and are answered as slots free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_clients_hold_at_most_max_clients_descriptors() {
        let (addr, task) = endpoint().await;
        let before = open_fds();
        let idle = MAX_CLIENTS + 32;
        let mut held = Vec::new();
        for _ in 0..idle {
            held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let grown = open_fds().saturating_sub(before);
        // Ours (one per client) and the server's (at most MAX_CLIENTS), with room for the
        // few that tests running beside this one open; without the cap it would be 2 · idle.
        let most = idle + MAX_CLIENTS + 16;
        assert!(most < 2 * idle);
        assert!(
            grown <= most,
            "{grown} descriptors for {idle} idle clients (at most {most} expected)"
        );
        // A real request still gets its answer once the idle ones time out.
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(30), s.read_to_string(&mut out))
            .await
            .expect("answered within 30 s")
            .unwrap();
        assert!(out.ends_with("braid_x 1\n"), "{out}");
        drop(held);
        task.abort();
    }
}
