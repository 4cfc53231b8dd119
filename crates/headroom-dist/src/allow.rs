//! `headroom agent --allow-targets CIDR,...`: the networks an agent may send load to.
//!
//! A token holder can point an agent at any address the agent's host reaches (that is what an
//! agent is for). An operator who lends a machine as an agent narrows that with a list of
//! networks: a job whose target, after name resolution, lies outside every one of them is
//! refused before any connection is made, and the controller is told why.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Most networks in one `--allow-targets` list.
pub const MAX_NETWORKS: usize = 256;

/// A network: an address and a prefix length (`10.0.0.0/8`, `::1/128`; a bare address is the
/// one host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in this network. An IPv4-mapped IPv6 address counts as its IPv4 one.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let bad = |why: &str| {
            format!("'{s}' is not a network ({why}); write e.g. 10.0.0.0/8, 192.0.2.7 or fd00::/8")
        };
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad("not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| bad(&format!("the prefix length is 0 to {max}")))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

/// A comma-separated list of networks, as `--allow-targets` takes it.
pub fn parse_networks(s: &str) -> Result<Vec<Cidr>, String> {
    let nets = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(Cidr::from_str)
        .collect::<Result<Vec<_>, _>>()?;
    if nets.is_empty() {
        return Err("--allow-targets lists no network".into());
    }
    if nets.len() > MAX_NETWORKS {
        return Err(format!(
            "--allow-targets lists {} networks, at most {MAX_NETWORKS}",
            nets.len()
        ));
    }
    Ok(nets)
}

/// `Ok` when `ip` lies in one of `allowed`; otherwise the message the controller is sent.
pub fn check_target(allowed: &[Cidr], ip: IpAddr, target_name: &str) -> Result<(), String> {
    if allowed.iter().any(|n| n.contains(ip)) {
        return Ok(());
    }
    let list: Vec<String> = allowed.iter().map(Cidr::to_string).collect();
    Err(format!(
        "this agent refuses to load {target_name} ({ip}): the address is outside its \
         --allow-targets {}",
        list.join(",")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_contain_what_they_should() {
        let n: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(n.contains("10.1.255.3".parse().unwrap()));
        assert!(!n.contains("10.2.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:10.1.0.9".parse().unwrap()));
        assert!(!n.contains("::1".parse().unwrap()));
        let host: Cidr = "192.0.2.7".parse().unwrap();
        assert!(host.contains("192.0.2.7".parse().unwrap()));
        assert!(!host.contains("192.0.2.8".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        assert!("::/0"
            .parse::<Cidr>()
            .unwrap()
            .contains("::1".parse().unwrap()));
    }

    #[test]
    fn bad_lists_are_refused_with_the_rule() {
        for bad in [
            "",
            ",",
            "10.0.0.0/33",
            "::/129",
            "host.example",
            "10.0.0.0/x",
        ] {
            assert!(parse_networks(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_networks("127.0.0.0/8, ::1").unwrap().len(), 2);
        let e = check_target(
            &parse_networks("127.0.0.0/8").unwrap(),
            "10.0.0.1".parse().unwrap(),
            "http://10.0.0.1/",
        )
        .unwrap_err();
        assert!(e.contains("10.0.0.1") && e.contains("127.0.0.0/8"), "{e}");
    }
}
