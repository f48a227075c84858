//! Packet captures of runs (`braid sim --pcap DIR`): one libpcap file per link direction and
//! run, `<variant>.rep<r>.<link>.<from>-<to>.pcap`, and `captures.json` listing them with the
//! simulator's own counters.
//!
//! Each datagram a link direction accepts is written as it enters the link (the simulated
//! time, from 0 at the start of the run, as the capture's timestamp), wrapped in IPv4 and UDP
//! (LINKTYPE_IPV4) between the endpoints' simulated addresses, both ports [`UDP_PORT`]; the
//! IPv4 hop limit is the one left at that hop, so a relayed datagram shows one lower on each
//! link it crosses. Datagrams a direction drops before the wire (down, queue full, random loss)
//! are not in its file; those lost on the wire when the link goes down are. `dist/braid.lua`
//! dissects the UDP payload in Wireshark and tshark.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_core::Instant;
use etherparse::PacketBuilder;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use serde_json::{Value, json};

use crate::record::RunRecord;
use crate::runner::PlanResult;
use crate::scenario::Plan;
use crate::world::Capture;

/// The UDP port of both ends in a capture (the one `dist/braid.lua` registers).
pub const UDP_PORT: u16 = 7447;

/// The index of a capture directory.
pub const INDEX: &str = "captures.json";

/// One link direction's capture file of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureFile {
    /// File name inside the capture directory.
    pub file: String,
    pub link: String,
    /// Sending and receiving `node.interface`.
    pub from: String,
    pub to: String,
    /// Records written.
    pub packets: u64,
    /// The link direction's counters from the run's record: datagrams accepted
    /// ([`crate::link::DirStats::sent`]) and, of those, the ones carrying stream data
    /// ([`crate::link::DirStats::data_sent`]).
    pub sent: u64,
    pub data_sent: u64,
}

type Writer = PcapWriter<BufWriter<File>>;

struct DirFile {
    name: String,
    link: String,
    from: String,
    to: String,
    /// Opened at the first datagram (a topology has many idle directions).
    writer: Option<Writer>,
    packets: u64,
}

/// A [`Capture`] sink writing a run's link directions to pcap files in a directory. The first
/// I/O error stops the capture and is returned by [`PcapCapture::finish`]; the run goes on
/// unchanged.
pub struct PcapCapture {
    dir: PathBuf,
    files: Vec<DirFile>,
    frame: Vec<u8>,
    error: Option<String>,
}

impl PcapCapture {
    /// The capture of repetition `rep` of variant `v` of `plan` into `dir` (which must exist).
    pub fn new(dir: &Path, plan: &Plan, v: usize, rep: u64) -> PcapCapture {
        let variant = &plan.variants[v];
        let prefix = variant_prefix(plan, v);
        let topo = &variant.topology;
        let end = |(n, i): (usize, usize)| {
            let node = &topo.nodes[n];
            format!("{}.{}", node.name, node.ifaces[i].name)
        };
        let mut files: Vec<DirFile> = Vec::with_capacity(2 * topo.links.len());
        for (l, link) in topo.links.iter().enumerate() {
            let ends = link.ends.map(|e| (e.node, e.iface));
            for d in 0..2 {
                let (a, b) = (ends[d], ends[1 - d]);
                let mut name = format!(
                    "{prefix}.rep{rep}.{}.{}-{}",
                    sanitize(&link.name),
                    sanitize(&topo.nodes[a.0].name),
                    sanitize(&topo.nodes[b.0].name),
                );
                if files.iter().any(|f| f.name == format!("{name}.pcap")) {
                    name = format!("{name}.link{l}");
                }
                files.push(DirFile {
                    name: format!("{name}.pcap"),
                    link: link.name.clone(),
                    from: end(a),
                    to: end(b),
                    writer: None,
                    packets: 0,
                });
            }
        }
        PcapCapture {
            dir: dir.to_path_buf(),
            files,
            frame: Vec::with_capacity(2048),
            error: None,
        }
    }

    /// Flushes every file (an idle direction gets a file without records) and lists them with
    /// the run's link counters; or the first error.
    pub fn finish(mut self, record: &RunRecord) -> Result<Vec<CaptureFile>, String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let mut out = Vec::with_capacity(self.files.len());
        for (i, f) in self.files.iter_mut().enumerate() {
            let writer = match f.writer.take() {
                Some(w) => w,
                None => open(&self.dir.join(&f.name))?,
            };
            writer
                .into_writer()
                .flush()
                .map_err(|e| format!("cannot write {}: {e}", self.dir.join(&f.name).display()))?;
            let stats = record
                .link_stats
                .get(i / 2)
                .map(|(a, b)| if i % 2 == 0 { a } else { b });
            out.push(CaptureFile {
                file: f.name.clone(),
                link: f.link.clone(),
                from: f.from.clone(),
                to: f.to.clone(),
                packets: f.packets,
                sent: stats.map_or(0, |s| s.sent),
                data_sent: stats.map_or(0, |s| s.data_sent),
            });
        }
        Ok(out)
    }

    fn write(&mut self, i: usize, t: Instant, src: u32, dst: u32, ttl: u8, data: &[u8]) {
        let Some(f) = self.files.get_mut(i) else {
            return;
        };
        let path = || self.dir.join(&f.name);
        if f.writer.is_none() {
            match open(&path()) {
                Ok(w) => f.writer = Some(w),
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
        self.frame.clear();
        let ip = |a: u32| Ipv4Addr::from(a).octets();
        let built = PacketBuilder::ipv4(ip(src), ip(dst), ttl)
            .udp(UDP_PORT, UDP_PORT)
            .write(&mut self.frame, data);
        if let Err(e) = built {
            self.error = Some(format!(
                "{}: datagram not capturable: {e}",
                path().display()
            ));
            return;
        }
        let packet = PcapPacket::new(
            Duration::from_micros(t.micros()),
            self.frame.len() as u32,
            &self.frame,
        );
        let writer = f.writer.as_mut().expect("opened above");
        if let Err(e) = writer.write_packet(&packet) {
            self.error = Some(format!("cannot write {}: {e}", path().display()));
            return;
        }
        f.packets += 1;
    }
}

impl Capture for PcapCapture {
    fn datagram(
        &mut self,
        t: Instant,
        link: usize,
        dir: usize,
        src: u32,
        dst: u32,
        ttl: u8,
        data: &[u8],
    ) {
        if self.error.is_none() {
            self.write(2 * link + dir, t, src, dst, ttl, data);
        }
    }
}

fn open(path: &Path) -> Result<Writer, String> {
    let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let header = PcapHeader {
        datalink: DataLink::IPV4,
        ..PcapHeader::default()
    };
    PcapWriter::with_header(BufWriter::new(file), header)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes [`INDEX`] into `dir`: every capture file of every run, with the variant,
/// repetition, seed and the link direction's counters.
pub fn write_index(r: &PlanResult, dir: &Path) -> std::io::Result<()> {
    let mut files = Vec::new();
    for v in &r.variants {
        for (rep, run) in v.runs.iter().enumerate() {
            let Some(Ok(caps)) = &run.captures else {
                continue;
            };
            for c in caps {
                files.push(json!({
                    "file": c.file, "variant": v.name, "rep": rep, "seed": run.seed,
                    "link": c.link, "from": c.from, "to": c.to, "packets": c.packets,
                    "sent": c.sent, "data_sent": c.data_sent,
                }));
            }
        }
    }
    let doc: Value = json!({
        "scenario": r.scenario,
        "linktype": "IPv4",
        "udp_port": UDP_PORT,
        "files": files,
    });
    std::fs::write(
        dir.join(INDEX),
        serde_json::to_string_pretty(&doc).expect("JSON of plain data"),
    )
}

/// Variant `v`'s name as the start of its file names: safe in a file name, and with the
/// variant's index appended when another variant's name would give the same.
pub fn variant_prefix(plan: &Plan, v: usize) -> String {
    let name = sanitize(&plan.variants[v].name);
    let clash = plan
        .variants
        .iter()
        .enumerate()
        .any(|(i, o)| i != v && sanitize(&o.name) == name);
    if clash { format!("{name}-v{v}") } else { name }
}

/// A name safe in a file name.
pub(crate) fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
