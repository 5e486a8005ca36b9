# Applies the WithNAT base infrastructure of a six-zone region against a mocked hashicorp/aws
# (`tofu test`: nothing is created, the mock makes up the IDs) and asserts what dhctl and the
# module read from it.

mock_provider "aws" {
  override_data {
    target = data.aws_availability_zones.available
    values = {
      names = ["eu-central-1a", "eu-central-1b", "eu-central-1c", "eu-central-1d", "eu-central-1e", "eu-central-1f"]
    }
  }
}

# The mock would give both groups the same made-up ID.
override_resource {
  target = module.security-groups.aws_security_group.loadbalancer
  values = {
    id = "sg-loadbalancer"
  }
}

override_resource {
  target = module.security-groups.aws_security_group.node
  values = {
    id = "sg-node"
  }
}

variables {
  clusterConfiguration = {
    cloud = {
      prefix = "c1"
    }
    podSubnetCIDR = "10.111.0.0/16"
  }
  clusterUUID = "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
  providerClusterConfiguration = {
    layout       = "WithNAT"
    sshPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGs1c3RyYXR1cyBsYXlvdXRzIGNoZWNr stratus@example"
    provider = {
      providerAccessKeyId     = "AKIAEXAMPLE"
      providerSecretAccessKey = "secret-example"
      region                  = "eu-central-1"
    }
    vpcNetworkCIDR         = "10.241.0.0/16"
    publicNetworkAllowList = ["198.51.100.0/24"]
    zones                  = ["eu-central-1b"]
    withNAT = {
      bastionInstance = {
        instanceClass = {
          instanceType = "t3.small"
          ami          = "ami-0123456789abcdef0"
        }
      }
    }
    masterNodeGroup = {
      replicas = 1
      instanceClass = {
        instanceType = "m5.large"
        ami          = "ami-0fedcba9876543210"
      }
    }
  }
}

run "six_zone_region" {
  command = apply

  assert {
    condition     = length(output.cloud_discovery_data.zoneToSubnetIdMap) == 6
    error_message = "zoneToSubnetIdMap must name an internal subnet in each of the region's six zones."
  }
  assert {
    condition     = output.cloud_discovery_data.zones == tolist(["eu-central-1b"])
    error_message = "discovery zones must be the configured zones."
  }
  assert {
    condition     = output.cloud_discovery_data.loadBalancerSecurityGroup == "sg-loadbalancer"
    error_message = "loadBalancerSecurityGroup must be the load-balancer group, not the node group."
  }
  assert {
    condition     = output.cloud_discovery_data.instances.ami == "ami-0fedcba9876543210" && output.cloud_discovery_data.instances.associatePublicIPAddress == false
    error_message = "instances must carry the masters' AMI and no public address (WithNAT)."
  }
  assert {
    condition     = output.node_network_cidr == "10.241.0.0/16"
    error_message = "without nodeNetworkCIDR the VPC's CIDR is the node network."
  }
  assert {
    condition     = output.bastion_ip_address_for_ssh != ""
    error_message = "the bastion must have an address for SSH."
  }
}
