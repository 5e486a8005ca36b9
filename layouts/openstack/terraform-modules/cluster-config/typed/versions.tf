terraform {
  required_version = ">= 1.9.4"
}
