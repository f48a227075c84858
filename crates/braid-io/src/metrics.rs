//! A Prometheus endpoint: answers any HTTP request on a TCP address with the text exposition
//! format that `render` produces at that moment.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Produces the metrics text (Prometheus text format 0.0.4).
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Binds `addr` and serves `GET /metrics` (any path) until the task is dropped.
pub async fn serve(
    addr: SocketAddr,
    render: Render,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("metrics endpoint {addr}: {e}")))?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                continue;
            };
            let render = render.clone();
            tokio::spawn(async move {
                let mut req = [0u8; 2048];
                let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut req));
                if !matches!(read.await, Ok(Ok(n)) if n > 0) {
                    return;
                }
                let body = render();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
                let _ = s.shutdown().await;
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

    #[tokio::test]
    async fn answers_with_the_rendered_text() {
        // A free port: bound, then released for the endpoint.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let task = serve(addr, Arc::new(|| "braid_x 1\n".to_string()))
            .await
            .unwrap();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.ends_with("\r\n\r\nbraid_x 1\n"), "{out}");
        task.abort();
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
