# A master: the server on the given ports (booted from a volume when rootDiskSize is set), the
# etcd data volume attached to it, and a floating IP when the layout gives masters one.

variable "name" {
  description = "Name of the server."
  type        = string
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
  description = "Ports of the server; the first one is its main interface."
  type        = list(string)
}

variable "floating_ip_pool" {
  description = "External network to take a floating IP from for the first port; empty for none."
  type        = string
}

variable "server_group_id" {
  description = "Server group to schedule into; empty for none."
  type        = string
}

variable "metadata" {
  description = "Server and volume metadata."
  type        = map(string)
}

data "openstack_images_image_v2" "image" {
  name        = var.image_name
  most_recent = true
}

resource "openstack_compute_instance_v2" "master" {
  name              = var.name
  flavor_name       = var.flavor_name
  image_id          = var.root_disk_size == null ? data.openstack_images_image_v2.image.id : null
  key_pair          = var.keypair_name
  availability_zone = var.zone
  user_data         = var.cloud_config == "" ? null : base64decode(var.cloud_config)
  config_drive      = true
  metadata          = var.metadata

  dynamic "block_device" {
    for_each = var.root_disk_size == null ? [] : [var.root_disk_size]
    content {
      uuid                  = data.openstack_images_image_v2.image.id
      source_type           = "image"
      destination_type      = "volume"
      boot_index            = 0
      volume_size           = block_device.value
      volume_type           = var.volume_type
      delete_on_termination = true
    }
  }

  dynamic "network" {
    for_each = var.port_ids
    content {
      port = network.value
    }
  }

  dynamic "scheduler_hints" {
    for_each = var.server_group_id == "" ? [] : [var.server_group_id]
    content {
      group = scheduler_hints.value
    }
  }

  lifecycle {
    ignore_changes = [user_data, image_id]
  }
}

resource "openstack_blockstorage_volume_v3" "etcd" {
  name              = "${var.name}-kubernetes-data"
  size              = var.etcd_disk_size_gb
  volume_type       = var.volume_type
  availability_zone = var.zone
  metadata          = var.metadata
}

resource "openstack_compute_volume_attach_v2" "etcd" {
  instance_id = openstack_compute_instance_v2.master.id
  volume_id   = openstack_blockstorage_volume_v3.etcd.id
}

resource "openstack_networking_floatingip_v2" "master" {
  count = var.floating_ip_pool == "" ? 0 : 1
  pool  = var.floating_ip_pool
  tags  = [for k, v in var.metadata : "${k}=${v}"]
}

resource "openstack_networking_floatingip_associate_v2" "master" {
  count       = var.floating_ip_pool == "" ? 0 : 1
  floating_ip = openstack_networking_floatingip_v2.master[0].address
  port_id     = var.port_ids[0]
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
  value       = var.floating_ip_pool == "" ? openstack_compute_instance_v2.master.access_ip_v4 : openstack_networking_floatingip_v2.master[0].address
}

output "kubernetes_data_device_path" {
  description = "Device of the etcd data volume inside the server."
  value       = openstack_compute_volume_attach_v2.etcd.device
}

output "etcd_volume" {
  description = "The etcd data volume: size, type and zone."
  value = {
    size              = openstack_blockstorage_volume_v3.etcd.size
    volume_type       = openstack_blockstorage_volume_v3.etcd.volume_type
    availability_zone = openstack_blockstorage_volume_v3.etcd.availability_zone
  }
}

output "floating_ip_pools" {
  description = "Pools of the master's floating IPs (empty for none)."
  value       = openstack_networking_floatingip_v2.master[*].pool
}

output "server" {
  description = "The server: flavor, zone, scheduler group and port count."
  value = {
    flavor_name       = openstack_compute_instance_v2.master.flavor_name
    availability_zone = openstack_compute_instance_v2.master.availability_zone
    server_group_id   = var.server_group_id
    ports             = length(var.port_ids)
    boot_volume_size  = var.root_disk_size
  }
}
