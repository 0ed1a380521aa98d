PATH = './cifar_net.pth'
torch.save(net.state_dict(), PATH)

net = Net()
net.load_state_dict(torch.load(PATH, weights_only=True))

# A model saved on a GPU, loaded on a machine without one:
state = torch.load(PATH, map_location="cpu", weights_only=True)
