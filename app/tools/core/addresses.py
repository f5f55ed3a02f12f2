"""Which addresses an outgoing fetch may reach (pure: no DNS, no sockets). Loopback, private,
link-local, CGNAT, multicast, reserved and the cloud metadata addresses are refused; the caller has
already resolved the host (app/tools/net/address.py) and names what the owner allowed."""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata services: AWS/GCP/Azure/OpenStack 169.254.169.254 (link-local anyway), AWS's IPv6
# fd00:ec2::254 (private anyway), Alibaba 100.100.100.200 (CGNAT anyway): named so the refusal says so.
_METADATA = {
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("fd00:ec2::254"),
    ipaddress.ip_address("100.100.100.200"),
}
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def refusal(address: str) -> str | None:
    """Why `address` may not be fetched from, or None when it is a public address."""
    try:
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in _METADATA:
        return f"{ip} is a cloud metadata address"
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return f"{ip} is a carrier-grade NAT address"
    if ip.is_private or ip.is_unspecified or ip.is_reserved:
        return f"{ip} is a private or reserved address"
    if not ip.is_global:
        return f"{ip} is not a public address"
    return None
