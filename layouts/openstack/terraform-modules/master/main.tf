# A master at Deckhouse's addresses inside module.master: its root volume (when rootDiskSize is
# set), its anti-affinity server group (AntiAffinity without a shared group given), the server
# on the given ports or network, the etcd volume attached to it (kubernetes_data) and a
# floating IP when the layout gives masters one.

variable "prefix" {
  description = "The cluster prefix: stem of every name, name of the server group."
  type        = string
}

variable "node_index" {
  description = "Index of the master."
  type        = number
}

variable "cloud_config" {
  description = "Base64 cloud-init user data."
  type        = string
}

variable "flavor_name" {
  description = "Nova flavor."
  type        = string
}

variable "image_name" {
  description = "Glance image (the most recent of that name)."
  type        = string
}

variable "root_disk_size" {
  description = "Root volume size in GiB; null boots from the flavor's disk."
  type        = number
}

variable "zone" {
  description = "Availability zone of the server and its volumes."
  type        = string
}

variable "volume_type" {
  description = "Cinder volume type of the root and etcd volumes in that zone."
  type        = string
}

variable "etcd_disk_size_gb" {
  description = "Size of the etcd data volume in GiB."
  type        = number
}

variable "keypair_name" {
  description = "Nova keypair of the cluster."
  type        = string
}

variable "port_ids" {
  description = "Ports of the server, the first one its main interface; empty attaches network_name."
  type        = list(string)
}

variable "network_name" {
  description = "Network the server is attached to by name when it has no ports (Simple)."
  type        = string
  default     = ""
}

variable "security_groups" {
  description = "Security groups of a server attached by network name (Simple)."
  type        = list(string)
  default     = []
}

variable "config_drive" {
  description = "Whether the server gets a config drive (the external network has no DHCP)."
  type        = bool
}

variable "floating_ip_pool" {
  description = "External network to take a floating IP from; empty for none."
  type        = string
}

variable "server_group" {
  description = "masterNodeGroup.serverGroup: policy (AntiAffinity, ManuallyManaged or empty) and the group ID to use (a shared or manually managed group; empty creates one for AntiAffinity)."
  type = object({
    policy = string
    id     = string
  })
}

variable "metadata" {
  description = "Server and volume metadata."
  type        = map(string)
}

locals {
  name              = "${var.prefix}-master-${var.node_index}"
  create_group      = var.server_group.policy == "AntiAffinity" && var.server_group.id == ""
  server_group_id   = local.create_group ? openstack_compute_servergroup_v2.master[0].id : var.server_group.id
  floating_ip_count = var.floating_ip_pool == "" ? 0 : 1
}

data "openstack_images_image_v2" "master" {
  name        = var.image_name
  most_recent = true
}

resource "openstack_blockstorage_volume_v3" "master" {
  count                = var.root_disk_size == null ? 0 : 1
  name                 = "${var.prefix}-master-root-volume-${var.node_index}"
  size                 = var.root_disk_size
  image_id             = data.openstack_images_image_v2.master.id
  volume_type          = var.volume_type
  availability_zone    = var.zone
  metadata             = var.metadata
  enable_online_resize = true

  lifecycle {
    ignore_changes = [metadata, availability_zone, image_id]
  }
}

resource "openstack_compute_servergroup_v2" "master" {
  count    = local.create_group ? 1 : 0
  name     = var.prefix
  policies = ["anti-affinity"]
}

resource "openstack_compute_instance_v2" "master" {
  name              = local.name
  image_name        = data.openstack_images_image_v2.master.name
  flavor_name       = var.flavor_name
  key_pair          = var.keypair_name
  config_drive      = var.config_drive
  availability_zone = var.zone
  user_data         = var.cloud_config == "" ? null : base64decode(var.cloud_config)
  security_groups   = length(var.port_ids) == 0 ? var.security_groups : null
  metadata          = var.metadata

  dynamic "block_device" {
    for_each = openstack_blockstorage_volume_v3.master
    content {
      uuid                  = block_device.value.id
      source_type           = "volume"
      destination_type      = "volume"
      boot_index            = 0
      delete_on_termination = true
    }
  }

  dynamic "network" {
    for_each = length(var.port_ids) == 0 ? [var.network_name] : []
    content {
      name = network.value
    }
  }

  dynamic "network" {
    for_each = var.port_ids
    content {
      port = network.value
    }
  }

  dynamic "scheduler_hints" {
    for_each = contains(["AntiAffinity", "ManuallyManaged"], var.server_group.policy) ? [local.server_group_id] : []
    content {
      group = scheduler_hints.value
    }
  }

  lifecycle {
    ignore_changes = [user_data]
  }
}

resource "openstack_blockstorage_volume_v3" "kubernetes_data" {
  name                 = "${var.prefix}-kubernetes-data-${var.node_index}"
  description          = "etcd and Kubernetes certificates of ${local.name}"
  size                 = var.etcd_disk_size_gb
  volume_type          = var.volume_type
  availability_zone    = var.zone
  metadata             = var.metadata
  enable_online_resize = true

  lifecycle {
    ignore_changes = [metadata, availability_zone, description]
  }
}

resource "openstack_compute_volume_attach_v2" "kubernetes_data" {
  instance_id = openstack_compute_instance_v2.master.id
  volume_id   = openstack_blockstorage_volume_v3.kubernetes_data.id
}

resource "openstack_compute_floatingip_v2" "master" {
  count = local.floating_ip_count
  pool  = var.floating_ip_pool
}

resource "openstack_compute_floatingip_associate_v2" "master" {
  count                 = local.floating_ip_count
  floating_ip           = openstack_compute_floatingip_v2.master[0].address
  instance_id           = openstack_compute_instance_v2.master.id
  wait_until_associated = true

  lifecycle {
    ignore_changes = [wait_until_associated]
  }
}

output "id" {
  description = "The server's ID."
  value       = openstack_compute_instance_v2.master.id
}

output "node_internal_ip_address" {
  description = "The server's address on its main port."
  value       = openstack_compute_instance_v2.master.access_ip_v4
}

output "master_ip_address_for_ssh" {
  description = "Where dhctl connects: the floating IP, else the main port's address."
  value       = var.floating_ip_pool == "" ? openstack_compute_instance_v2.master.access_ip_v4 : openstack_compute_floatingip_v2.master[0].address
}

output "kubernetes_data_device_path" {
  description = "Device of the etcd data volume inside the server."
  value       = openstack_compute_volume_attach_v2.kubernetes_data.device
}

output "etcd_volume" {
  description = "The etcd data volume: size, type and zone."
  value = {
    size              = openstack_blockstorage_volume_v3.kubernetes_data.size
    volume_type       = openstack_blockstorage_volume_v3.kubernetes_data.volume_type
    availability_zone = openstack_blockstorage_volume_v3.kubernetes_data.availability_zone
  }
}

output "floating_ip_pools" {
  description = "Pools of the master's floating IPs (empty for none)."
  value       = openstack_compute_floatingip_v2.master[*].pool
}

output "server" {
  description = "The server: flavor, zone, scheduler group, config drive, port count and boot volume size."
  value = {
    flavor_name       = openstack_compute_instance_v2.master.flavor_name
    availability_zone = openstack_compute_instance_v2.master.availability_zone
    server_group_id   = local.server_group_id
    created_group     = length(openstack_compute_servergroup_v2.master) == 1
    config_drive      = openstack_compute_instance_v2.master.config_drive
    ports             = length(var.port_ids)
    boot_volume_size  = try(openstack_blockstorage_volume_v3.master[0].size, null)
  }
}
