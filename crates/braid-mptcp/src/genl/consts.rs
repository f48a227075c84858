//! Numbers of the kernel's `mptcp_pm` generic-netlink family.
//!
//! Every value here comes from `include/uapi/linux/mptcp_pm.h` (generated from
//! `Documentation/netlink/specs/mptcp_pm.yaml`) or `include/uapi/linux/mptcp.h`,
//! as of Linux 6.18. The enum name in the header is given above each group.

/// `MPTCP_PM_NAME` (mptcp_pm.h).
pub const FAMILY_NAME: &str = "mptcp_pm";
/// `MPTCP_PM_VER` (mptcp_pm.h).
pub const FAMILY_VERSION: u8 = 1;
/// `MPTCP_PM_EV_GRP_NAME` (mptcp.h): the multicast group of the events. Joining it
/// needs `CAP_NET_ADMIN` (`GENL_MCAST_CAP_NET_ADMIN` in net/mptcp/pm_netlink.c).
pub const EVENTS_GROUP: &str = "mptcp_pm_events";

// Commands: the anonymous `MPTCP_PM_CMD_*` enum (mptcp_pm.h).
pub const CMD_ADD_ADDR: u8 = 1;
pub const CMD_DEL_ADDR: u8 = 2;
pub const CMD_GET_ADDR: u8 = 3;
pub const CMD_FLUSH_ADDRS: u8 = 4;
pub const CMD_SET_LIMITS: u8 = 5;
pub const CMD_GET_LIMITS: u8 = 6;
pub const CMD_SET_FLAGS: u8 = 7;
pub const CMD_ANNOUNCE: u8 = 8;
pub const CMD_REMOVE: u8 = 9;
pub const CMD_SUBFLOW_CREATE: u8 = 10;
pub const CMD_SUBFLOW_DESTROY: u8 = 11;

// Command attributes: the anonymous `MPTCP_PM_ATTR_*` enum (mptcp_pm.h). The
// endpoint commands use `MPTCP_PM_ENDPOINT_ADDR = 1`, the same number as `ATTR_ADDR`.
pub const ATTR_ADDR: u16 = 1;
pub const ATTR_RCV_ADD_ADDRS: u16 = 2;
pub const ATTR_SUBFLOWS: u16 = 3;
pub const ATTR_TOKEN: u16 = 4;
pub const ATTR_LOC_ID: u16 = 5;
pub const ATTR_ADDR_REMOTE: u16 = 6;

// Nested address attributes: `MPTCP_PM_ADDR_ATTR_*` (mptcp_pm.h).
pub const ADDR_ATTR_FAMILY: u16 = 1; // u16, host order
pub const ADDR_ATTR_ID: u16 = 2; // u8
pub const ADDR_ATTR_ADDR4: u16 = 3; // u32, network order (struct in_addr)
pub const ADDR_ATTR_ADDR6: u16 = 4; // 16 bytes (struct in6_addr)
pub const ADDR_ATTR_PORT: u16 = 5; // u16, host order: see `addr.rs`
pub const ADDR_ATTR_FLAGS: u16 = 6; // u32
pub const ADDR_ATTR_IF_IDX: u16 = 7; // s32

// Event types: `enum mptcp_event_type` (mptcp_pm.h).
pub const EVENT_CREATED: u8 = 1;
pub const EVENT_ESTABLISHED: u8 = 2;
pub const EVENT_CLOSED: u8 = 3;
pub const EVENT_ANNOUNCED: u8 = 6;
pub const EVENT_REMOVED: u8 = 7;
pub const EVENT_SUB_ESTABLISHED: u8 = 10;
pub const EVENT_SUB_CLOSED: u8 = 11;
pub const EVENT_SUB_PRIORITY: u8 = 13;
pub const EVENT_LISTENER_CREATED: u8 = 15;
pub const EVENT_LISTENER_CLOSED: u8 = 16;

// Event attributes: `enum mptcp_event_attr` (mptcp_pm.h).
pub const EV_ATTR_TOKEN: u16 = 1; // u32
pub const EV_ATTR_FAMILY: u16 = 2; // u16
pub const EV_ATTR_LOC_ID: u16 = 3; // u8
pub const EV_ATTR_REM_ID: u16 = 4; // u8
pub const EV_ATTR_SADDR4: u16 = 5; // be32
pub const EV_ATTR_SADDR6: u16 = 6; // 16 bytes
pub const EV_ATTR_DADDR4: u16 = 7; // be32
pub const EV_ATTR_DADDR6: u16 = 8; // 16 bytes
pub const EV_ATTR_SPORT: u16 = 9; // be16
pub const EV_ATTR_DPORT: u16 = 10; // be16
pub const EV_ATTR_BACKUP: u16 = 11; // u8
pub const EV_ATTR_ERROR: u16 = 12; // u8
pub const EV_ATTR_FLAGS: u16 = 13; // u16
// 14 is MPTCP_ATTR_TIMEOUT (u32), which no event carries.
pub const EV_ATTR_IF_IDX: u16 = 15; // s32 (nla_put_s32 in pm_netlink.c; the spec says u32)
pub const EV_ATTR_RESET_REASON: u16 = 16; // u32
pub const EV_ATTR_RESET_FLAGS: u16 = 17; // u32
pub const EV_ATTR_SERVER_SIDE: u16 = 18; // u8, deprecated in 6.18 for `FLAGS`

// Event flags (`MPTCP_ATTR_FLAGS`): `MPTCP_PM_EV_FLAG_*` (mptcp.h).
pub const EV_FLAG_DENY_JOIN_ID0: u16 = 1 << 0;
pub const EV_FLAG_SERVER_SIDE: u16 = 1 << 1;

// Address families (linux/socket.h).
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;
