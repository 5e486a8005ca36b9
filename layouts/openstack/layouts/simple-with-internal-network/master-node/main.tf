# A master: its port on the layout's main network (after an external port where the layout
# has one), the server, its etcd volume, and a floating IP where the layout gives one.

locals {
  name            = "${local.prefix}-master-${var.nodeIndex}"
  master_zones    = sort(setintersection(keys(module.config.master.volume_type_map), local.zones))
  zone            = element(local.master_zones, var.nodeIndex)
  security_groups = concat([local.prefix], module.config.master.additional_security_groups)
}

module "external_port" {
  source               = "../../../terraform-modules/port"
  count                = local.net.external_port ? 1 : 0
  name                 = "${local.name}-external"
  network_name         = local.net.external_network_name
  port_security        = local.net.port_security
  security_group_names = local.security_groups
  allowed_cidrs        = [module.config.pod_subnet_cidr]
  metadata             = module.config.metadata
}

module "main_port" {
  source               = "../../../terraform-modules/port"
  name                 = "${local.name}-main"
  network_name         = local.net.internal_network_name
  subnet_name          = local.net.internal_subnet_name
  port_security        = local.net.port_security
  security_group_names = local.security_groups
  allowed_cidrs        = [module.config.pod_subnet_cidr]
  metadata             = module.config.metadata
}

module "master" {
  source            = "../../../terraform-modules/master"
  name              = local.name
  cloud_config      = var.cloudConfig
  flavor_name       = module.config.master.flavor_name
  image_name        = module.config.master.image_name
  root_disk_size    = module.config.master.root_disk_size
  zone              = local.zone
  volume_type       = module.config.master.volume_type_map[local.zone]
  etcd_disk_size_gb = module.config.master.etcd_disk_size_gb
  keypair_name      = local.prefix
  port_ids          = concat(module.external_port[*].id, [module.main_port.id])
  floating_ip_pool  = local.net.master_floating_ip ? local.net.external_network_name : ""
  server_group_id   = module.config.master.anti_affinity ? var.masterServerGroupID : module.config.master.server_group_id
  metadata          = merge(module.config.metadata, module.config.master.metadata)
}
