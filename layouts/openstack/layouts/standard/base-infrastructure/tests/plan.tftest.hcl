# Plans the Standard layout's base-infrastructure module with a mocked OpenStack provider (`tofu test`, nothing is
# created) and asserts what it would create.

variables {
  clusterConfiguration = {
    cloud = {
      prefix = "c1"
    }
    podSubnetCIDR = "10.111.0.0/16"
  }
  clusterUUID         = "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
  cloudConfig         = "I2Nsb3VkLWNvbmZpZwo="
  nodeIndex           = 1
  nodeGroupName       = "worker"
  masterServerGroupID = "11111111-2222-4333-8444-555555555555"
  providerClusterConfiguration = {
    layout       = "Standard"
    sshPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGs1c3RyYXR1cyBsYXlvdXRzIGNoZWNr stratus@example"
    sshAllowList = ["203.0.113.0/24", "198.51.100.0/24"]
    tags = {
      team = "platform"
    }
    zones = ["nova", "zone-b", "zone-c"]
    provider = {
      authURL    = "https://keystone.example.com:5000/v3"
      domainName = "Default"
      tenantName = "tenant-a"
      username   = "deckhouse"
      password   = "not-a-secret"
      region     = "RegionOne"
    }
    masterNodeGroup = {
      replicas = 3
      instanceClass = {
        flavorName               = "m1.large"
        imageName                = "ubuntu-24-04"
        rootDiskSize             = 40
        etcdDiskSizeGb           = 15
        additionalSecurityGroups = ["monitoring"]
        additionalTags = {
          role = "master"
        }
      }
      volumeTypeMap = {
        nova     = "ceph-ssd"
        "zone-b" = "fast-ssd"
      }
      serverGroup = {
        policy = "AntiAffinity"
      }
    }
    nodeGroups = [
      {
        name     = "worker"
        replicas = 2
        volumeTypeMap = {
          nova     = "ceph-ssd"
          "zone-b" = "fast-ssd"
        }
        instanceClass = {
          flavorName                   = "m1.medium"
          imageName                    = "ubuntu-24-04"
          rootDiskSize                 = 30
          configDrive                  = true
          mainNetwork                  = "c1"
          additionalNetworks           = ["storage"]
          networksWithSecurityDisabled = ["storage"]
          floatingIPPools              = ["public"]
          additionalTags = {
            role = "worker"
          }
        }
      },
    ]
    standard = {
      internalNetworkCIDR       = "192.168.199.0/24"
      internalNetworkDNSServers = ["192.0.2.53", "198.51.100.53"]
      internalNetworkSecurity   = true
      externalNetworkName       = "public"
      bastion = {
        zone       = "nova"
        volumeType = "ceph-ssd"
        instanceClass = {
          flavorName   = "m1.small"
          imageName    = "ubuntu-24-04"
          rootDiskSize = 20
        }
      }
    }
  }
}

mock_provider "openstack" {
  mock_data "openstack_compute_availability_zones_v2" {
    defaults = {
      names = ["nova", "zone-b"]
    }
  }
  mock_data "openstack_networking_network_v2" {
    defaults = {
      id = "0f3c1d52-6a0e-4e57-9c1b-2f4e7d0a9b11"
    }
  }
  mock_data "openstack_networking_subnet_v2" {
    defaults = {
      id   = "5d2e0b8a-1c3f-4a6d-8e9b-7f0a1b2c3d44"
      cidr = "10.10.0.0/24"
    }
  }
  mock_data "openstack_networking_secgroup_v2" {
    defaults = {
      id = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c66"
    }
  }
  mock_data "openstack_images_image_v2" {
    defaults = {
      id = "c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e77"
    }
  }
}

run "creates_network_router_groups_bastion" {
  command = apply

  assert {
    condition     = join(",", keys(output.cloud_discovery_data)) == "apiVersion,externalNetworkNames,instances,internalNetworkNames,kind,layout,loadBalancer,podNetworkMode,zones" && join(",", keys(output.cloud_discovery_data.instances)) == "imageName,mainNetwork,securityGroups,sshKeyPairName"
    error_message = "the discovery data must carry exactly the keys Deckhouse's OpenStackCloudDiscoveryData schema allows for this layout (additionalProperties: false)"
  }

  assert {
    condition     = length(module.base.security_rules) == 8
    error_message = "the cluster group must have 8 ingress rules: within the cluster, NodePorts from anywhere, and SSH, the Kubernetes API and ICMP from each of the 2 allow-list CIDRs"
  }

  assert {
    condition     = contains([for r in module.base.security_rules : "${r.protocol}/${coalesce(r.port, 0)}/${r.source}"], "tcp/22/203.0.113.0/24")
    error_message = "SSH must be open to 203.0.113.0/24"
  }

  assert {
    condition     = length([for r in module.base.security_rules : r if r.protocol == "tcp" && r.port == 30000 && r.port_max == 32767 && endswith(r.source, "/0")]) == 1
    error_message = "the NodePort range 30000-32767 must be open to anyone, so load balancers reach their members"
  }

  assert {
    condition     = contains([for r in module.base.security_rules : "${r.protocol}/${coalesce(r.port, 0)}/${r.source}"], "tcp/6443/198.51.100.0/24")
    error_message = "the Kubernetes API must be open to 198.51.100.0/24"
  }

  assert {
    condition     = module.base.keypair_name == "c1"
    error_message = "the keypair must be named after the prefix"
  }

  assert {
    condition     = module.base.master_server_group_id != ""
    error_message = "AntiAffinity must create the masters' server group"
  }

  assert {
    condition     = openstack_networking_subnet_v2.internal.cidr == "192.168.199.0/24" && openstack_networking_subnet_v2.internal.gateway_ip == "192.168.199.1"
    error_message = "the internal subnet must use internalNetworkCIDR with its first address as gateway"
  }

  assert {
    condition     = openstack_networking_subnet_v2.internal.dns_nameservers == tolist(["192.0.2.53", "198.51.100.53"])
    error_message = "the internal subnet must use internalNetworkDNSServers"
  }

  assert {
    condition     = openstack_networking_router_v2.router.external_network_id == "0f3c1d52-6a0e-4e57-9c1b-2f4e7d0a9b11"
    error_message = "the router must have its gateway on the external network"
  }

  assert {
    condition     = openstack_networking_router_interface_v2.internal.subnet_id == openstack_networking_subnet_v2.internal.id
    error_message = "the router must be attached to the internal subnet"
  }

  assert {
    condition     = length(openstack_compute_instance_v2.bastion) == 1 && openstack_compute_floatingip_v2.bastion[0].pool == "public"
    error_message = "the bastion must exist with a floating IP from the external network"
  }

  assert {
    condition     = output.cloud_discovery_data.podNetworkMode == "DirectRoutingWithPortSecurityEnabled" && output.cloud_discovery_data.zones == tolist(["nova", "zone-b"])
    error_message = "discovery data must name the pod network mode and the usable zones"
  }

  assert {
    condition     = output.node_network_cidr == "192.168.199.0/24" && output.bastion_ip_address_for_ssh != ""
    error_message = "dhctl needs the node network and the bastion's address"
  }
}
