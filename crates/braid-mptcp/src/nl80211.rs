//! The signal strength of a Wi-Fi station from nl80211 (`NL80211_CMD_GET_STATION`, dumped per
//! interface): for a station (client) interface the one entry is the access point it is
//! associated with, and `NL80211_STA_INFO_SIGNAL` is the signal of the frames received from
//! it, in dBm. This is what `iw dev wlan0 station dump` prints as `signal`.

use std::fmt;

use netlink_packet_generic::GenlMessage;
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_sys::protocols::NETLINK_GENERIC;

use crate::Error;
use crate::client::{CTRL_ATTR_FAMILY_ID, genl_attrs, kernel_error};
use crate::genl::{ParseError, attr};
use crate::nl::{NlSocket, RawPayload, RequestError};

/// The family name the kernel registers when a cfg80211 driver is loaded.
pub const FAMILY_NAME: &str = "nl80211";

// include/uapi/linux/nl80211.h
const NL80211_CMD_GET_STATION: u8 = 17;
const NL80211_ATTR_IFINDEX: u16 = 3;
const NL80211_ATTR_STA_INFO: u16 = 21;
const NL80211_STA_INFO_SIGNAL: u16 = 7;
const NL80211_STA_INFO_SIGNAL_AVG: u16 = 13;
const NLA_HDRLEN: usize = 4;

/// Requests to nl80211 on one generic-netlink socket.
pub struct Nl80211 {
    sock: NlSocket,
    family: u16,
}

impl fmt::Debug for Nl80211 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nl80211")
            .field("family", &self.family)
            .finish_non_exhaustive()
    }
}

impl Nl80211 {
    /// Opens a socket in the calling thread's namespace and resolves the family; without a
    /// Wi-Fi driver the family does not exist and this says so.
    pub async fn connect() -> Result<Nl80211, Error> {
        let mut sock = NlSocket::open(NETLINK_GENERIC)?;
        let ctrl = GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName(FAMILY_NAME.to_string())],
        };
        let replies = match sock.request(GenlMessage::from_payload(ctrl), false).await {
            Ok(r) => r,
            Err(RequestError::Kernel { errno, .. }) if errno == libc_enoent() => {
                return Err(Error::Io(std::io::Error::other(
                    "the kernel has no nl80211 family: no Wi-Fi (cfg80211) driver is loaded",
                )));
            }
            Err(e) => return Err(kernel_error("CTRL_CMD_GETFAMILY", e)),
        };
        let msg = replies
            .first()
            .ok_or_else(|| Error::Parse(ParseError::Framing("empty nlctrl reply".into())))?;
        let mut family = None;
        for a in attr::walk(genl_attrs(msg)?) {
            let (kind, v) = a?;
            if kind == CTRL_ATTR_FAMILY_ID {
                family = Some(attr::get_u16("CTRL_ATTR_FAMILY_ID", v)?);
            }
        }
        let family = family.ok_or(Error::Parse(ParseError::Missing("CTRL_ATTR_FAMILY_ID")))?;
        Ok(Nl80211 { sock, family })
    }

    /// The signal of the station an interface is associated with, dBm; `None` when it is
    /// not associated.
    pub async fn station_signal(&mut self, ifindex: u32) -> Result<Option<i8>, Error> {
        let req = RawPayload {
            kind: self.family,
            bytes: get_station_request(ifindex),
        };
        let replies = self
            .sock
            .request(req, true)
            .await
            .map_err(|e| kernel_error("NL80211_CMD_GET_STATION", e))?;
        for msg in &replies {
            if let Some(s) = parse_station_signal(genl_attrs(msg)?)? {
                return Ok(Some(s));
            }
        }
        Ok(None)
    }
}

/// The generic-netlink header and the IFINDEX attribute of a GET_STATION dump.
fn get_station_request(ifindex: u32) -> Vec<u8> {
    let mut b = vec![NL80211_CMD_GET_STATION, 0, 0, 0];
    b.extend_from_slice(&((NLA_HDRLEN + 4) as u16).to_ne_bytes());
    b.extend_from_slice(&NL80211_ATTR_IFINDEX.to_ne_bytes());
    b.extend_from_slice(&ifindex.to_ne_bytes());
    b
}

/// `NL80211_STA_INFO_SIGNAL` (or its average) inside `NL80211_ATTR_STA_INFO`.
pub fn parse_station_signal(attrs: &[u8]) -> Result<Option<i8>, ParseError> {
    for a in attr::walk(attrs) {
        let (kind, v) = a?;
        if kind & 0x3fff != NL80211_ATTR_STA_INFO {
            continue;
        }
        let (mut signal, mut avg) = (None, None);
        for s in attr::walk(v) {
            let (k, sv) = s?;
            match k & 0x3fff {
                NL80211_STA_INFO_SIGNAL => {
                    signal = Some(attr::get_u8("NL80211_STA_INFO_SIGNAL", sv)? as i8)
                }
                NL80211_STA_INFO_SIGNAL_AVG => {
                    avg = Some(attr::get_u8("NL80211_STA_INFO_SIGNAL_AVG", sv)? as i8)
                }
                _ => {}
            }
        }
        return Ok(signal.or(avg));
    }
    Ok(None)
}

fn libc_enoent() -> i32 {
    nix::errno::Errno::ENOENT as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((NLA_HDRLEN + value.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(value);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b
    }

    #[test]
    fn signal_is_read_from_the_nested_station_info() {
        // STA_INFO { INACTIVE_TIME, SIGNAL = -67 dBm } after a MAC attribute.
        let inner = [
            nla(1, &7u32.to_ne_bytes()),
            nla(NL80211_STA_INFO_SIGNAL, &[(-67i8) as u8]),
        ]
        .concat();
        let msg = [
            nla(6, &[0, 1, 2, 3, 4, 5]),
            nla(NL80211_ATTR_STA_INFO | 0x8000, &inner),
        ]
        .concat();
        assert_eq!(parse_station_signal(&msg).unwrap(), Some(-67));
        // Only the average: used when the last-frame signal is missing.
        let inner = nla(NL80211_STA_INFO_SIGNAL_AVG, &[(-70i8) as u8]);
        let msg = nla(NL80211_ATTR_STA_INFO, &inner);
        assert_eq!(parse_station_signal(&msg).unwrap(), Some(-70));
        // No station info: not associated.
        assert_eq!(parse_station_signal(&nla(6, &[0; 6])).unwrap(), None);
    }

    #[test]
    fn malformed_station_info_is_an_error_not_a_panic() {
        let bad = nla(NL80211_ATTR_STA_INFO, &[200, 0, 7, 0]);
        assert!(parse_station_signal(&bad).is_err());
        let short = nla(NL80211_ATTR_STA_INFO, &nla(NL80211_STA_INFO_SIGNAL, &[]));
        assert!(parse_station_signal(&short).is_err());
        for n in 0..20 {
            let _ = parse_station_signal(&vec![0xff; n]);
        }
    }

    #[test]
    fn request_names_the_interface() {
        let r = get_station_request(7);
        assert_eq!(r[0], NL80211_CMD_GET_STATION);
        assert_eq!(&r[8..12], &7u32.to_ne_bytes());
    }

    /// On a machine without Wi-Fi the error says why.
    #[tokio::test]
    async fn missing_family_is_a_clear_error() {
        if std::path::Path::new("/sys/class/ieee80211").exists() {
            return;
        }
        let e = Nl80211::connect().await.unwrap_err();
        assert!(e.to_string().contains("no Wi-Fi"), "{e}");
    }
}
