# Plans the Simple layout's master-node module with a mocked OpenStack provider (`tofu test`, nothing is
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
    layout       = "Simple"
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
    simple = {
      externalNetworkName = "public"
      externalNetworkDHCP = true
      podNetworkMode      = "VXLAN"
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

run "master_on_external_network" {
  command = apply

  assert {
    condition     = module.master.server.availability_zone == "zone-b"
    error_message = "master 1 must go to the second zone both configured and offered (nova, zone-b)"
  }

  assert {
    condition     = module.master.etcd_volume.size == 15 && module.master.etcd_volume.volume_type == "fast-ssd" && module.master.etcd_volume.availability_zone == "zone-b"
    error_message = "the etcd volume must be 15 GiB of the zone's volume type (volumeTypeMap) in the master's zone"
  }

  assert {
    condition     = module.master.server.server_group_id == "11111111-2222-4333-8444-555555555555"
    error_message = "with AntiAffinity the master must be scheduled into the base infrastructure's server group"
  }

  assert {
    condition     = module.master.server.boot_volume_size == 40 && module.master.server.flavor_name == "m1.large"
    error_message = "the master must boot from a 40 GiB volume with its flavor"
  }

  assert {
    condition     = output.kubernetes_data_device_path != "" && output.node_internal_ip_address != ""
    error_message = "dhctl needs the etcd device and the master's address"
  }

  assert {
    condition     = module.master.server.ports == 0
    error_message = "the master must have one port, on the external network"
  }

  assert {
    condition     = length(module.master.floating_ip_pools) == 0
    error_message = "Simple gives masters no floating IP"
  }
}
