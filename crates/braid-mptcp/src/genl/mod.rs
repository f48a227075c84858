//! The `mptcp_pm` generic-netlink family: typed commands, events and addresses.

mod addr;
pub(crate) mod attr;
mod command;
pub(crate) mod consts;
mod event;

pub use addr::{AddrFlags, Endpoint, PmAddr};
pub use attr::ParseError;
pub use command::{PmCommand, Token, command_name};
pub use consts::{EVENTS_GROUP, FAMILY_NAME, FAMILY_VERSION};
pub use event::{ConnInfo, PmEvent, Reset, SubflowInfo};
