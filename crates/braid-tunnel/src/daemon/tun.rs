//! The TUN device: created with its addresses, MTU, queue length and routes; read and written
//! in batches. With `offload`, the kernel hands over TCP super-segments (TSO) that tun-rs cuts
//! into MTU-sized packets, and packets written are coalesced again (GRO), each batch one
//! system call where it can; without, one packet per call, drained until the device is empty.

use std::io;
use std::process::Command;

use tun_rs::{AsyncDevice, DeviceBuilder, GROTable, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use super::config::{Prefix, TunConfig};

/// Packets written per batch before a flush is forced.
const WRITE_BATCH: usize = IDEAL_BATCH_SIZE;

/// Capacity of a write buffer with offload: what tun-rs needs to coalesce into it.
const GRO_CAPACITY: usize = 2 * VIRTIO_NET_HDR_LEN + 65_535;

/// A TUN device with its read and write batches.
pub struct Tun {
    dev: AsyncDevice,
    offload: bool,
    /// Raw read buffer (virtio header and super-segment) when offloading.
    raw: Vec<u8>,
    bufs: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    /// Packets read by the last `recv`/`try_recv`.
    count: usize,
    gro: GROTable,
    out: Vec<Vec<u8>>,
    out_len: usize,
    /// Packets the kernel refused (a full queue, an invalid packet).
    pub write_errors: u64,
    /// Reads with offload whose packet could not be split into segments (a malformed virtio
    /// header or segment): dropped.
    pub read_dropped: u64,
}

impl Tun {
    /// Creates the device, brings it up and installs the routes.
    pub fn create(cfg: &TunConfig) -> io::Result<Tun> {
        let mut b = DeviceBuilder::new()
            .name(&cfg.name)
            .mtu(cfg.mtu)
            .tx_queue_len(cfg.txqueuelen)
            .offload(cfg.offload);
        let mut addrs = vec![&cfg.address];
        addrs.extend(cfg.addresses.iter());
        let mut v4 = false;
        for a in addrs {
            let p = Prefix::parse(a).map_err(io::Error::other)?;
            match p.addr {
                std::net::IpAddr::V4(ip) if !v4 => {
                    v4 = true;
                    b = b.ipv4(ip, p.len, None);
                }
                std::net::IpAddr::V4(_) => {
                    return Err(io::Error::other("tun: only one IPv4 address is supported"));
                }
                std::net::IpAddr::V6(ip) => b = b.ipv6(ip, p.len),
            }
        }
        let dev = b.build_async().map_err(|e| {
            io::Error::new(e.kind(), format!("create TUN device {}: {e}", cfg.name))
        })?;
        for r in &cfg.routes {
            route(&cfg.name, r)?;
        }
        // With offload a segment is as long as the kernel's segment size, which follows the
        // device's MTU at the time, not the configured one (it may be raised at runtime):
        // room for the largest IP packet, so a read never fails for a short buffer and the
        // MTU check sees every packet whole.
        let (batch, each) = if cfg.offload {
            (IDEAL_BATCH_SIZE, 65_535)
        } else {
            (1, usize::from(cfg.mtu).max(1500) + 64)
        };
        Ok(Tun {
            dev,
            offload: cfg.offload,
            raw: vec![0; VIRTIO_NET_HDR_LEN + 65_535],
            bufs: vec![vec![0; each]; batch],
            sizes: vec![0; batch],
            count: 0,
            gro: GROTable::default(),
            out: Vec::new(),
            out_len: 0,
            write_errors: 0,
            read_dropped: 0,
        })
    }

    /// Waits for and reads the next batch of packets (cancel-safe). With offload, a packet
    /// read whole that cannot be split is dropped and counted, and the wait goes on.
    pub async fn recv(&mut self) -> io::Result<()> {
        self.count = 0;
        loop {
            let r = if self.offload {
                self.dev
                    .recv_multiple(&mut self.raw, &mut self.bufs, &mut self.sizes, 0)
                    .await
            } else {
                let r = self.dev.recv(&mut self.bufs[0]).await;
                r.map(|n| {
                    self.sizes[0] = n;
                    1
                })
            };
            match r {
                Ok(n) => {
                    self.count = n;
                    return Ok(());
                }
                Err(e) if self.unsplittable(&e) => self.read_dropped += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `e` is tun-rs refusing the packet it read (its own errors carry no OS error
    /// code), not the device failing.
    fn unsplittable(&self, e: &io::Error) -> bool {
        self.offload && e.raw_os_error().is_none()
    }

    /// Reads the next batch if one is waiting; `false` when the device is empty.
    pub fn try_recv(&mut self) -> io::Result<bool> {
        self.count = 0;
        let r = if self.offload {
            self.dev
                .try_recv_multiple(&mut self.raw, &mut self.bufs, &mut self.sizes, 0)
        } else {
            self.dev.try_recv(&mut self.bufs[0]).map(|n| {
                self.sizes[0] = n;
                1
            })
        };
        match r {
            Ok(n) => {
                self.count = n;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if self.unsplittable(&e) => {
                self.read_dropped += 1;
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// The packets of the last read.
    pub fn packets(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.count).map(|i| &self.bufs[i][..self.sizes[i]])
    }

    /// Queues a packet for the device; returns `true` when the batch is full and should be
    /// flushed.
    pub fn queue(&mut self, packet: &[u8]) -> bool {
        let head = if self.offload { VIRTIO_NET_HDR_LEN } else { 0 };
        if self.out.len() <= self.out_len {
            // tun-rs coalesces a packet into an earlier one only where that one's buffer can
            // take the whole super-segment without growing (room for two virtio headers and
            // 64 kB); with less, nothing coalesces and every packet is its own write.
            let cap = if self.offload { GRO_CAPACITY } else { 1500 };
            self.out.push(Vec::with_capacity(cap));
        }
        let b = &mut self.out[self.out_len];
        b.clear();
        b.resize(head, 0);
        b.extend_from_slice(packet);
        self.out_len += 1;
        self.out_len >= WRITE_BATCH
    }

    /// Writes the queued packets. A packet the kernel refuses is counted and dropped.
    pub async fn flush(&mut self) {
        if self.out_len == 0 {
            return;
        }
        let n = self.out_len;
        self.out_len = 0;
        if self.offload {
            if self
                .dev
                .send_multiple(&mut self.gro, &mut self.out[..n], VIRTIO_NET_HDR_LEN)
                .await
                .is_err()
            {
                self.write_errors += 1;
            }
        } else {
            for b in &self.out[..n] {
                if self.dev.send(b).await.is_err() {
                    self.write_errors += 1;
                }
            }
        }
    }
}

fn route(dev: &str, prefix: &str) -> io::Result<()> {
    let p = Prefix::parse(prefix).map_err(io::Error::other)?;
    let fam = if p.addr.is_ipv4() { "-4" } else { "-6" };
    let out = Command::new("ip")
        .args([fam, "route", "replace", &p.to_string(), "dev", dev])
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("route {p} dev {dev}: ip: {e}")))?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "route {p} dev {dev}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Packets read from the TUN device that are longer than the tunnel carries (the device's MTU
/// was raised at runtime, or a sender ignores it) are dropped and answered with ICMP
/// "fragmentation needed" / ICMPv6 "packet too big" naming the tunnel MTU, rate-limited, so the
/// sender's path-MTU discovery adapts instead of its TCP stalling.
#[derive(Debug)]
pub struct TooBig {
    mtu: u16,
    limiter: crate::frame::icmp::TooBigLimiter,
    /// Answers waiting to be queued on the device.
    pending: Vec<Vec<u8>>,
    /// Packets over the MTU (dropped).
    pub oversize: u64,
    /// "Too big" answers written back.
    pub answered: u64,
}

impl TooBig {
    /// For a tunnel that carries packets of at most `mtu` bytes.
    pub fn new(mtu: u16) -> TooBig {
        TooBig {
            mtu,
            limiter: crate::frame::icmp::TooBigLimiter::default(),
            pending: Vec::new(),
            oversize: 0,
            answered: 0,
        }
    }

    /// Whether `packet` (possibly truncated by the read) is over the MTU: then it must be
    /// dropped, and its answer, when the rate limit allows, waits for [`TooBig::flush`].
    pub fn check(&mut self, now: braid_core::Instant, packet: &[u8]) -> bool {
        let over = matches!(
            crate::frame::ip::packet_len(packet, usize::from(self.mtu)),
            Err(crate::frame::FrameError::TooLong { .. })
        );
        if !over {
            return false;
        }
        self.oversize += 1;
        let mut answer = Vec::new();
        if crate::frame::icmp::too_big(packet, self.mtu, &mut answer) && self.limiter.allow(now) {
            self.answered += 1;
            self.pending.push(answer);
        }
        true
    }

    /// Queues the answers on the device.
    pub fn flush(&mut self, tun: &mut Tun) {
        for a in self.pending.drain(..) {
            tun.queue(&a);
        }
    }

    /// Counters for the status document.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "mtu": self.mtu,
            "oversize": self.oversize,
            "answered": self.answered,
            "rate_limited": self.limiter.limited,
        })
    }
}
