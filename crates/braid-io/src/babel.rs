//! babeld's local interface (babeld(8), `local-port` / `local-path`): a line protocol on a TCP
//! or Unix stream socket. `braid route` reads its neighbours (with their hello history and
//! costs) and routes from there.
//!
//! On connect babeld sends a header, then answers each command line with `ok`, `no [msg]` or
//! `bad`:
//!
//! ```text
//! BABEL 1.0
//! version babeld-1.12.1
//! host m1
//! my-id 02:00:00:00:00:00:00:01
//! ok
//! ```
//!
//! `dump` lists every interface, neighbour, exported route (`xroute`) and route as `add …`
//! lines, then `ok`; `monitor` does the same and then reports each change as it happens:
//!
//! ```text
//! add interface e0 up true ipv6 fe80::ff:fe00:1 ipv4 10.0.0.1
//! change neighbour 5625155 address fe80::ff:fe00:2 if e0 reach ffe0 ureach 0000 rxcost 256 txcost 258 cost 258
//! add xroute 10.0.0.1/32-0.0.0.0/0 prefix 10.0.0.1/32 from 0.0.0.0/0 metric 0
//! add route 5625155 prefix 10.0.0.3/32 from 0.0.0.0/0 installed yes id 02:00:00:00:00:00:00:03 metric 518 refmetric 260 via fe80::ff:fe00:2 if e0
//! flush neighbour 5625155 address fe80::ff:fe00:2 if e0 reach 0000 ureach 0000 rxcost 65535 txcost 65535 cost 65535
//! ```
//!
//! [`parse`] reads one line (any line, never a panic: an unexpected one is a [`LineError`]);
//! [`Table`] applies the lines to babeld's state as last reported; [`Client`] connects,
//! checks the header and reads lines.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// babeld's metric for "unreachable" (`INFINITY` in babeld.h).
pub const INFINITY: u32 = 0xFFFF;

/// The longest line accepted (babeld writes at most 511 bytes).
pub const MAX_LINE: usize = 1024;

/// A router id: babeld's 8-byte EUI-64, shown as `xx:xx:xx:xx:xx:xx:xx:xx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouterId(pub u64);

impl fmt::Display for RouterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0.to_be_bytes();
        for (i, x) in b.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{x:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for RouterId {
    type Err = ();
    fn from_str(s: &str) -> Result<RouterId, ()> {
        let mut v = 0u64;
        let mut n = 0;
        for part in s.split(':') {
            if part.len() != 2 || n == 8 {
                return Err(());
            }
            v = (v << 8) | u64::from(u8::from_str_radix(part, 16).map_err(|_| ())?);
            n += 1;
        }
        if n == 8 { Ok(RouterId(v)) } else { Err(()) }
    }
}

/// An address prefix as babeld writes it (`10.0.0.1/32`, `::/0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// The default prefix (`0.0.0.0/0`, `::/0`): babeld's "from" of a route that is not
    /// source-specific.
    pub fn is_default(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Prefix {
    type Err = ();
    fn from_str(s: &str) -> Result<Prefix, ()> {
        let (a, l) = s.split_once('/').ok_or(())?;
        let addr: IpAddr = a.parse().map_err(|_| ())?;
        let len: u8 = l.parse().map_err(|_| ())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(());
        }
        Ok(Prefix { addr, len })
    }
}

/// What a line does to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Add,
    Change,
    Flush,
}

/// An interface babeld runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub up: bool,
    pub ipv6: Option<Ipv6Addr>,
    pub ipv4: Option<Ipv4Addr>,
}

/// A neighbour: a babeld speaker heard on one interface, known by its (link-local) address.
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbour {
    /// babeld's handle for the object (stable while it exists).
    pub id: String,
    pub address: IpAddr,
    pub ifname: String,
    /// The last 16 multicast hellos, newest in the top bit (1: received).
    pub reach: u16,
    /// The same for unicast hellos.
    pub ureach: u16,
    pub rxcost: u32,
    pub txcost: u32,
    /// Smoothed RTT in milliseconds, when babeld measures it.
    pub rtt_ms: Option<f64>,
    pub rttcost: Option<u32>,
    /// The link's cost ([`INFINITY`]: unusable).
    pub cost: u32,
}

/// A route babeld exports (originates): `redistribute` or a local address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xroute {
    pub prefix: Prefix,
    pub from: Prefix,
    pub metric: u32,
}

/// A route babeld learnt from a neighbour (selected or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// babeld's handle for the object.
    pub id: String,
    pub prefix: Prefix,
    pub from: Prefix,
    /// Selected and installed in the kernel by babeld.
    pub installed: bool,
    /// The router that originates the prefix.
    pub router_id: RouterId,
    /// The metric through this neighbour ([`INFINITY`]: retracted).
    pub metric: u32,
    /// The metric the neighbour advertised (0: the neighbour originates the prefix).
    pub refmetric: u32,
    /// The neighbour's address.
    pub via: IpAddr,
    pub ifname: String,
}

/// One line of the local interface.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// `BABEL 1.0`: the protocol version, first line of the header.
    Banner(String),
    Version(String),
    Host(String),
    MyId(RouterId),
    /// The end of the header or of a command's answer.
    Ok,
    No(Option<String>),
    Bad,
    Interface(Kind, Interface),
    Neighbour(Kind, Neighbour),
    Xroute(Kind, Xroute),
    Route(Kind, Route),
}

/// A line that is not the protocol: what was wrong, for logs and counters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("empty line")]
    Empty,
    #[error("line longer than {MAX_LINE} bytes")]
    TooLong,
    #[error("unknown line `{0}`")]
    Unknown(String),
    #[error("{object}: missing `{key}`")]
    Missing {
        object: &'static str,
        key: &'static str,
    },
    #[error("{object}: bad value `{value}` for `{key}`")]
    Value {
        object: &'static str,
        key: &'static str,
        value: String,
    },
}

/// Parses one line (without its newline; a trailing `\r` is ignored).
pub fn parse(line: &str) -> Result<Line, LineError> {
    if line.len() > MAX_LINE {
        return Err(LineError::TooLong);
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let mut words = line.split_ascii_whitespace();
    let first = words.next().ok_or(LineError::Empty)?;
    let rest: Vec<&str> = words.collect();
    let one = |what: &'static str| -> Result<String, LineError> {
        match rest.as_slice() {
            [v] => Ok((*v).to_string()),
            _ => Err(LineError::Missing {
                object: what,
                key: "value",
            }),
        }
    };
    let kind = match first {
        "BABEL" => return one("BABEL").map(Line::Banner),
        "version" => return one("version").map(Line::Version),
        "host" => return one("host").map(Line::Host),
        "my-id" => {
            let v = one("my-id")?;
            return v
                .parse()
                .map(Line::MyId)
                .map_err(|()| bad("my-id", "id", &v));
        }
        "ok" if rest.is_empty() => return Ok(Line::Ok),
        "bad" if rest.is_empty() => return Ok(Line::Bad),
        "no" => {
            return Ok(Line::No((!rest.is_empty()).then(|| rest.join(" "))));
        }
        "add" => Kind::Add,
        "change" => Kind::Change,
        "flush" => Kind::Flush,
        _ => return Err(unknown(line)),
    };
    let (object, rest) = rest.split_first().ok_or_else(|| unknown(line))?;
    match *object {
        "interface" => interface(rest).map(|i| Line::Interface(kind, i)),
        "neighbour" => neighbour(rest).map(|n| Line::Neighbour(kind, n)),
        "xroute" => xroute(rest).map(|x| Line::Xroute(kind, x)),
        "route" => route(rest).map(|r| Line::Route(kind, r)),
        _ => Err(unknown(line)),
    }
}

fn unknown(line: &str) -> LineError {
    // Keep the message one short line whatever came in.
    let mut s: String = line.chars().take(60).collect();
    if s.len() < line.len() {
        s.push('…');
    }
    LineError::Unknown(s.escape_debug().to_string())
}

fn bad(object: &'static str, key: &'static str, value: &str) -> LineError {
    LineError::Value {
        object,
        key,
        value: value
            .chars()
            .take(40)
            .collect::<String>()
            .escape_debug()
            .to_string(),
    }
}

/// The `key value` pairs after an object's name: the first value of each key counts, unknown
/// keys (a later babeld's additions) are ignored. A key without its value is an error.
struct Fields<'a> {
    object: &'static str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Fields<'a> {
    fn new(object: &'static str, words: &[&'a str]) -> Result<Fields<'a>, LineError> {
        if words.len() % 2 != 0 {
            return Err(LineError::Missing {
                object,
                key: "value of the last key",
            });
        }
        Ok(Fields {
            object,
            pairs: words.chunks(2).map(|c| (c[0], c[1])).collect(),
        })
    }

    fn opt(&self, key: &'static str) -> Option<&'a str> {
        self.pairs.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }

    fn get(&self, key: &'static str) -> Result<&'a str, LineError> {
        self.opt(key).ok_or(LineError::Missing {
            object: self.object,
            key,
        })
    }

    fn parsed<T: std::str::FromStr>(&self, key: &'static str) -> Result<T, LineError> {
        let v = self.get(key)?;
        v.parse().map_err(|_| bad(self.object, key, v))
    }

    fn opt_parsed<T: std::str::FromStr>(&self, key: &'static str) -> Result<Option<T>, LineError> {
        match self.opt(key) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| bad(self.object, key, v)),
        }
    }

    fn hex16(&self, key: &'static str) -> Result<u16, LineError> {
        let v = self.get(key)?;
        u16::from_str_radix(v, 16).map_err(|_| bad(self.object, key, v))
    }

    fn yes_no(&self, key: &'static str, yes: &str, no: &str) -> Result<bool, LineError> {
        match self.get(key)? {
            v if v == yes => Ok(true),
            v if v == no => Ok(false),
            v => Err(bad(self.object, key, v)),
        }
    }
}

fn interface(words: &[&str]) -> Result<Interface, LineError> {
    let (name, rest) = words.split_first().ok_or(LineError::Missing {
        object: "interface",
        key: "name",
    })?;
    let f = Fields::new("interface", rest)?;
    Ok(Interface {
        name: (*name).to_string(),
        up: f.yes_no("up", "true", "false")?,
        ipv6: f.opt_parsed("ipv6")?,
        ipv4: f.opt_parsed("ipv4")?,
    })
}

fn neighbour(words: &[&str]) -> Result<Neighbour, LineError> {
    let (id, rest) = words.split_first().ok_or(LineError::Missing {
        object: "neighbour",
        key: "id",
    })?;
    let f = Fields::new("neighbour", rest)?;
    Ok(Neighbour {
        id: (*id).to_string(),
        address: f.parsed("address")?,
        ifname: f.get("if")?.to_string(),
        reach: f.hex16("reach")?,
        ureach: f.opt("ureach").map_or(Ok(0), |_| f.hex16("ureach"))?,
        rxcost: f.parsed("rxcost")?,
        txcost: f.parsed("txcost")?,
        rtt_ms: f
            .opt_parsed::<f64>("rtt")?
            .filter(|r| r.is_finite() && *r >= 0.0),
        rttcost: f.opt_parsed("rttcost")?,
        cost: f.parsed("cost")?,
    })
}

fn xroute(words: &[&str]) -> Result<Xroute, LineError> {
    // `add xroute PREFIX-FROM prefix P from F metric M`: the first word is the object's key.
    let rest = words.get(1..).ok_or(LineError::Missing {
        object: "xroute",
        key: "id",
    })?;
    let f = Fields::new("xroute", rest)?;
    Ok(Xroute {
        prefix: f.parsed("prefix")?,
        from: f.parsed("from")?,
        metric: f.parsed("metric")?,
    })
}

fn route(words: &[&str]) -> Result<Route, LineError> {
    let (id, rest) = words.split_first().ok_or(LineError::Missing {
        object: "route",
        key: "id",
    })?;
    let f = Fields::new("route", rest)?;
    let router_id = f.get("id")?;
    Ok(Route {
        id: (*id).to_string(),
        prefix: f.parsed("prefix")?,
        from: f.parsed("from")?,
        installed: f.yes_no("installed", "yes", "no")?,
        router_id: router_id
            .parse()
            .map_err(|()| bad("route", "id", router_id))?,
        metric: f.parsed("metric")?,
        refmetric: f.parsed("refmetric")?,
        via: f.parsed("via")?,
        ifname: f.get("if")?.to_string(),
    })
}

/// babeld's state as its lines describe it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub version: Option<String>,
    pub host: Option<String>,
    pub my_id: Option<RouterId>,
    pub interfaces: BTreeMap<String, Interface>,
    /// By babeld's handle.
    pub neighbours: BTreeMap<String, Neighbour>,
    pub xroutes: BTreeMap<(Prefix, Prefix), Xroute>,
    /// By babeld's handle.
    pub routes: BTreeMap<String, Route>,
}

impl Table {
    /// Applies one line: `add` and `change` insert or replace, `flush` removes. Header and
    /// answer lines set the header fields or do nothing.
    pub fn apply(&mut self, line: &Line) {
        match line {
            Line::Version(v) => self.version = Some(v.clone()),
            Line::Host(h) => self.host = Some(h.clone()),
            Line::MyId(id) => self.my_id = Some(*id),
            Line::Banner(_) | Line::Ok | Line::No(_) | Line::Bad => {}
            Line::Interface(k, i) => upsert(&mut self.interfaces, *k, i.name.clone(), i),
            Line::Neighbour(k, n) => upsert(&mut self.neighbours, *k, n.id.clone(), n),
            Line::Xroute(k, x) => upsert(&mut self.xroutes, *k, (x.prefix, x.from), x),
            Line::Route(k, r) => upsert(&mut self.routes, *k, r.id.clone(), r),
        }
    }

    /// Forgets everything (before a new dump).
    pub fn clear(&mut self) {
        *self = Table::default();
    }
}

fn upsert<K: Ord, V: Clone>(m: &mut BTreeMap<K, V>, kind: Kind, key: K, v: &V) {
    match kind {
        Kind::Add | Kind::Change => {
            m.insert(key, v.clone());
        }
        Kind::Flush => {
            m.remove(&key);
        }
    }
}

/// Where babeld's local interface listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `local-port`: a TCP port (babeld binds it on the loopback address `::1`).
    Tcp(std::net::SocketAddr),
    /// `local-path`: a Unix stream socket.
    Unix(PathBuf),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(a) => write!(f, "{a}"),
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

impl std::str::FromStr for Endpoint {
    type Err = String;
    /// A socket address (`[::1]:33123`), a bare port (`33123`, on `::1` as babeld binds it) or
    /// a path (containing `/`).
    fn from_str(s: &str) -> Result<Endpoint, String> {
        if s.contains('/') {
            return Ok(Endpoint::Unix(PathBuf::from(s)));
        }
        if let Ok(port) = s.parse::<u16>() {
            return Ok(Endpoint::Tcp((Ipv6Addr::LOCALHOST, port).into()));
        }
        s.parse().map(Endpoint::Tcp).map_err(|_| {
            format!(
                "babeld endpoint `{s}`: expected a port (33123), an address ([::1]:33123) or a socket path"
            )
        })
    }
}

/// A client of babeld's local interface that failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    // The I/O error is part of the message (not a `source`): printed with its causes, the
    // line would say it twice.
    #[error(
        "cannot reach babeld's local interface at {endpoint} ({reason}): is babeld running with `local-path` or `local-port` set to it?"
    )]
    Connect {
        endpoint: Endpoint,
        reason: std::io::Error,
    },
    #[error("babeld at {endpoint}: {msg}")]
    Protocol { endpoint: Endpoint, msg: String },
    #[error("babeld at {endpoint}: {reason}")]
    Io {
        endpoint: Endpoint,
        reason: std::io::Error,
    },
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A connection to babeld's local interface.
pub struct Client {
    endpoint: Endpoint,
    stream: BufReader<Box<dyn Stream>>,
    buf: Vec<u8>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// What babeld says about itself before the first command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    pub protocol: String,
    pub version: Option<String>,
    pub host: Option<String>,
    pub my_id: Option<RouterId>,
}

/// Lines of babeld's header are read within this time.
const HEADER_WAIT: Duration = Duration::from_secs(5);

impl Client {
    /// Connects and reads the header (`BABEL 1.0` … `ok`); refuses another protocol version.
    pub async fn connect(endpoint: &Endpoint) -> Result<(Client, Header), ClientError> {
        let connect_err = |reason| ClientError::Connect {
            endpoint: endpoint.clone(),
            reason,
        };
        let stream: Box<dyn Stream> = match endpoint {
            Endpoint::Tcp(a) => Box::new(
                tokio::net::TcpStream::connect(a)
                    .await
                    .map_err(connect_err)?,
            ),
            Endpoint::Unix(p) => Box::new(
                tokio::net::UnixStream::connect(p)
                    .await
                    .map_err(connect_err)?,
            ),
        };
        let mut c = Client {
            endpoint: endpoint.clone(),
            stream: BufReader::new(stream),
            buf: Vec::new(),
        };
        let header = tokio::time::timeout(HEADER_WAIT, c.header())
            .await
            .map_err(|_| c.protocol(format!("no header within {HEADER_WAIT:?}")))??;
        Ok((c, header))
    }

    async fn header(&mut self) -> Result<Header, ClientError> {
        let mut h = Header::default();
        loop {
            let Some(line) = self.next_line().await? else {
                return Err(self.protocol("closed during the header".into()));
            };
            match parse(&line) {
                Ok(Line::Banner(v)) => {
                    if v.split('.').next() != Some("1") {
                        return Err(self.protocol(format!(
                            "protocol BABEL {v}: only version 1.x is understood"
                        )));
                    }
                    h.protocol = v;
                }
                Ok(Line::Version(v)) => h.version = Some(v),
                Ok(Line::Host(v)) => h.host = Some(v),
                Ok(Line::MyId(v)) => h.my_id = Some(v),
                Ok(Line::Ok) if !h.protocol.is_empty() => return Ok(h),
                _ => {
                    return Err(self.protocol(format!(
                        "not babeld's local interface (header line `{}`)",
                        line.chars().take(60).collect::<String>().escape_debug()
                    )));
                }
            }
        }
    }

    fn protocol(&self, msg: String) -> ClientError {
        ClientError::Protocol {
            endpoint: self.endpoint.clone(),
            msg,
        }
    }

    /// Sends one command (`dump`, `monitor`, …).
    pub async fn send(&mut self, command: &str) -> Result<(), ClientError> {
        let s = self.stream.get_mut();
        s.write_all(format!("{command}\n").as_bytes())
            .await
            .map_err(|reason| ClientError::Io {
                endpoint: self.endpoint.clone(),
                reason,
            })
    }

    /// The next line, without its newline; `None` when babeld closed the connection. A line
    /// longer than [`MAX_LINE`] is returned cut to that length (and then fails to parse as
    /// [`LineError::TooLong`]); bytes that are not UTF-8 are replaced. Cancel-safe.
    pub async fn next_line(&mut self) -> Result<Option<String>, ClientError> {
        loop {
            let avail = self
                .stream
                .fill_buf()
                .await
                .map_err(|reason| ClientError::Io {
                    endpoint: self.endpoint.clone(),
                    reason,
                })?;
            if avail.is_empty() {
                // Closed; a last line without newline still counts.
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(self.take_line()));
            }
            let (used, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            // Keep at most MAX_LINE + 1 bytes of a line: enough to tell it is too long.
            let room = (MAX_LINE + 1).saturating_sub(self.buf.len());
            let take = if done { used - 1 } else { used };
            self.buf.extend_from_slice(&avail[..take.min(room)]);
            self.stream.consume(used);
            if done {
                return Ok(Some(self.take_line()));
            }
        }
    }

    fn take_line(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        s
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
}

#[cfg(test)]
mod tests;
