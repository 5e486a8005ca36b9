# Deckhouse's addresses of the same resources (its layouts keep them at the top level): a state
# Deckhouse wrote is taken over by moves, without destroying anything.

moved {
  from = aws_subnet.kube_public
  to   = module.network.aws_subnet.kube_public
}

moved {
  from = aws_subnet.kube_internal
  to   = module.network.aws_subnet.kube_internal
}

moved {
  from = aws_internet_gateway.kube
  to   = module.network.aws_internet_gateway.kube
}

moved {
  from = aws_route_table.kube_public
  to   = module.network.aws_route_table.kube_public
}

moved {
  from = aws_route.internet_access_public
  to   = module.network.aws_route.internet_access_public
}

moved {
  from = aws_route_table_association.kube_public
  to   = module.network.aws_route_table_association.kube_public
}

moved {
  from = aws_eip.natgw
  to   = module.network.aws_eip.natgw[0]
}

moved {
  from = aws_nat_gateway.kube
  to   = module.network.aws_nat_gateway.kube[0]
}

moved {
  from = aws_route_table.kube_internal
  to   = module.network.aws_route_table.kube_internal[0]
}

moved {
  from = aws_route.internet_access_internal
  to   = module.network.aws_route.internet_access_internal[0]
}

moved {
  from = aws_route_table_association.kube_internal
  to   = module.network.aws_route_table_association.kube_internal
}

moved {
  from = aws_iam_role.node
  to   = module.iam.aws_iam_role.node[0]
}

moved {
  from = aws_iam_role_policy.node
  to   = module.iam.aws_iam_role_policy.node[0]
}

moved {
  from = aws_iam_instance_profile.node
  to   = module.iam.aws_iam_instance_profile.node
}

moved {
  from = aws_instance.bastion[0]
  to   = module.bastion[0].aws_instance.node
}

moved {
  from = aws_eip.bastion[0]
  to   = module.bastion[0].aws_eip.eip[0]
}

moved {
  from = aws_eip_association.bastion[0]
  to   = module.bastion[0].aws_eip_association.eip[0]
}

# VPC peerings: WithNAT declares them at the top level, WithoutNAT and Standard in
# module.vpc-peering; both chain to module.network.

moved {
  from = module.vpc-peering[0].aws_vpc_peering_connection.kube
  to   = aws_vpc_peering_connection.kube
}

moved {
  from = aws_vpc_peering_connection.kube
  to   = module.network.aws_vpc_peering_connection.kube
}

moved {
  from = module.vpc-peering[0].aws_vpc_peering_connection_accepter.kube
  to   = aws_vpc_peering_connection_accepter.kube
}

moved {
  from = aws_vpc_peering_connection_accepter.kube
  to   = module.network.aws_vpc_peering_connection_accepter.kube
}

moved {
  from = module.vpc-peering[0].aws_route.kube
  to   = aws_route.kube
}

moved {
  from = aws_route.kube
  to   = module.network.aws_route.kube
}

moved {
  from = module.vpc-peering[0].aws_route.target
  to   = aws_route.target
}

moved {
  from = aws_route.target
  to   = module.network.aws_route.target
}
