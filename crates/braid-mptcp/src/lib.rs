//! Linux kernel MPTCP over netlink.
