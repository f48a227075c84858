//! Tests against the running kernel, in network namespaces they create (root and
//! iproute2 needed). Each test deletes its namespaces when it ends, also on panic.
//!
//! `userspace_pm` follows the checks of the kernel selftest
//! tools/testing/selftests/net/mptcp/userspace_pm.sh.

#[path = "kernel/endpoints.rs"]
mod endpoints;
#[path = "kernel/events.rs"]
mod events;
#[path = "kernel/netns.rs"]
mod netns;
#[path = "kernel/route.rs"]
mod route;
#[path = "kernel/rtmon.rs"]
mod rtmon;
#[path = "kernel/userspace_pm.rs"]
mod userspace_pm;
#[path = "kernel/util.rs"]
mod util;
