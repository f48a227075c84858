//! The control socket of a daemon: a Unix stream socket where a client writes one request line
//! (e.g. `status`) and reads one JSON document back. `braid pm status` and `braid status` are
//! its clients.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// Answers a request line with a JSON value.
pub type Handler = Arc<dyn Fn(&str) -> serde_json::Value + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control socket {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("control socket: the path is empty (give a file, e.g. /run/braid/pm.sock)")]
    EmptyPath,
    #[error("control socket {0} is in use by a running daemon")]
    InUse(PathBuf),
    #[error("cannot reach the daemon at {path} ({source}): is it running?")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the daemon at {path} did not answer: {msg}")]
    Answer { path: PathBuf, msg: String },
}

/// Binds the socket (refusing if a live daemon holds it, replacing a stale file) and serves
/// requests until the task is dropped.
pub async fn serve(
    path: &Path,
    handler: Handler,
) -> Result<tokio::task::JoinHandle<()>, ControlError> {
    // An empty path would bind an unnamed socket nobody can reach.
    if path.as_os_str().is_empty() {
        return Err(ControlError::EmptyPath);
    }
    if path.exists() {
        if UnixStream::connect(path).await.is_ok() {
            return Err(ControlError::InUse(path.to_path_buf()));
        }
        let _ = std::fs::remove_file(path);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| ControlError::Bind {
            path: path.to_path_buf(),
            source,
        })?;
    }
    let listener = UnixListener::bind(path).map_err(|source| ControlError::Bind {
        path: path.to_path_buf(),
        source,
    })?;
    let slots = Arc::new(tokio::sync::Semaphore::new(crate::metrics::MAX_CLIENTS));
    Ok(tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(crate::metrics::ACCEPT_PAUSE).await;
                continue;
            };
            let h = handler.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let _ = answer(stream, h).await;
            });
        }
    }))
}

async fn answer(stream: UnixStream, handler: Handler) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut line = String::new();
    // A request is one short line; a client that sends nothing for 5 s is dropped.
    let mut reader = BufReader::new(r.take(4096));
    let read = reader.read_line(&mut line);
    if tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .is_err()
    {
        return Ok(());
    }
    let v = handler(line.trim());
    let mut out = serde_json::to_vec(&v).unwrap_or_default();
    out.push(b'\n');
    w.write_all(&out).await?;
    w.shutdown().await
}

/// Sends `request` to the daemon at `path` and returns its answer.
pub async fn request(path: &Path, request: &str) -> Result<serde_json::Value, ControlError> {
    let mut s = UnixStream::connect(path)
        .await
        .map_err(|source| ControlError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
    let fail = |msg: String| ControlError::Answer {
        path: path.to_path_buf(),
        msg,
    };
    s.write_all(format!("{request}\n").as_bytes())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .map_err(|_| fail("timed out after 10 s".into()))?
        .map_err(|e| fail(e.to_string()))?;
    serde_json::from_slice(&buf).map_err(|e| fail(format!("not JSON: {e}")))
}

/// [`request`] for callers without a runtime (the lab polls its daemons from a plain thread),
/// with the same errors; answers within `timeout`.
pub fn request_blocking(
    path: &Path,
    request: &str,
    timeout: Duration,
) -> Result<serde_json::Value, ControlError> {
    use std::io::{Read, Write};
    let mut s =
        std::os::unix::net::UnixStream::connect(path).map_err(|source| ControlError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
    let fail = |msg: String| ControlError::Answer {
        path: path.to_path_buf(),
        msg,
    };
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| fail(e.to_string()))?;
    s.write_all(format!("{request}\n").as_bytes())
        .map_err(|e| fail(e.to_string()))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| fail(e.to_string()))?;
    serde_json::from_slice(&buf).map_err(|e| fail(format!("not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn request_gets_the_handlers_answer_and_a_second_daemon_is_refused() {
        let path = std::env::temp_dir().join(format!("braid-io-ctl-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let h: Handler = Arc::new(|req| serde_json::json!({ "echo": req }));
        let task = serve(&path, h.clone()).await.unwrap();
        let v = request(&path, "status").await.unwrap();
        assert_eq!(v["echo"], "status");
        let p = path.clone();
        let v = tokio::task::spawn_blocking(move || {
            request_blocking(&p, "status", Duration::from_secs(5))
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(v["echo"], "status");
        let e = serve(&path, h).await.unwrap_err();
        assert!(matches!(e, ControlError::InUse(_)), "{e}");
        task.abort();
        let _ = task.await;
        // The listener is gone: the file is stale and a new daemon may take it.
        let task = serve(&path, Arc::new(|_| serde_json::json!(1)))
            .await
            .unwrap();
        assert_eq!(request(&path, "x").await.unwrap(), 1);
        task.abort();
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test]
    async fn an_empty_path_is_refused() {
        let e = serve(Path::new(""), Arc::new(|_| serde_json::json!(1)))
            .await
            .unwrap_err();
        assert!(matches!(e, ControlError::EmptyPath), "{e}");
    }

    #[tokio::test]
    async fn no_daemon_is_a_clear_error() {
        let e = request(Path::new("/nonexistent/braid.sock"), "status")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("is it running?"), "{e}");
        let e = request_blocking(
            Path::new("/nonexistent/braid.sock"),
            "status",
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.to_string().contains("is it running?"), "{e}");
    }
}
